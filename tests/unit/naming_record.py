"""Every name the drivers' naming modules give, for the examples and for long-named variants of them:
what tests/unit/test_naming_fit.py compares with the outputs recorded before `clouds/naming.fit` replaced
the three copies (fixtures/naming_recorded.json). `python -m tests.unit.naming_record` rewrites the file:
only ever from code whose names are known good, since existing environments are found by these names."""

from __future__ import annotations

import inspect
import itertools
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from vmplane.clouds.aws import naming as aws
from vmplane.clouds.gcp import naming as gcp
from vmplane.clouds.proxmox import naming as proxmox
from vmplane.envspec.load import load_spec
from vmplane.envspec.models import EnvSpec

ROOT = Path(__file__).resolve().parents[2]
RECORDED = Path(__file__).with_name("fixtures") / "naming_recorded.json"
MODULES: dict[str, ModuleType] = {"aws": aws, "gcp": gcp, "proxmox": proxmox}
LONG = "a" * 32  # the longest DNS label a name or pool may be (envspec DNS_LABEL)

# Values for each parameter name the naming functions take besides `spec` (pools come from the spec).
VALUES: dict[str, list[Any]] = {
    "index": [0, 99],
    "role": ["subnet-public", "rt-private"],
    "zone": ["us-east-1a", "europe-west1-b"],
    "kind": ["start"],
    "version": [1, 12],
    "purpose": ["vpc", "health"],
    "project": ["my-project"],
    "digest": ["0123abcd"],
    "domain": ["app.example.com"],
    "job_id": ["job-1", "j" * 40],
    "region": ["us-east-1", "cn-north-1"],
    "suffix": ["vm", "schedules"],
    "vmid": [100],
}


def specs() -> Iterator[tuple[str, EnvSpec]]:
    """Each example as written, and with its environment, org and a pool at the longest a spec allows."""
    for path in sorted((ROOT / "examples").glob("*.jsonc")):
        spec = load_spec(path)
        yield path.stem, spec
        yield f"{path.stem}+long", spec.model_copy(update={"name": LONG, "org": "o" * 32})


def _calls(fn: Callable[..., Any], spec: EnvSpec) -> Iterator[tuple[str, tuple[Any, ...]]] | None:
    params = list(inspect.signature(fn).parameters)
    values: list[list[Any]] = []
    for p in params:
        if p == "spec":
            values.append([spec])
        elif p == "pool":
            values.append([*spec.pools, LONG])
        elif p in ("org", "env"):
            values.append([spec.org if p == "org" else spec.name])
        elif p in VALUES:
            values.append(VALUES[p])
        else:
            return None  # not a name maker (valid, description, tag_tokens...)
    return ((",".join(str(a) for a in args if not isinstance(a, EnvSpec)), args) for args in itertools.product(*values))


def names() -> dict[str, str]:
    """`{"<cloud>.<function>(<example>;<args>)": name}` for every public naming function."""
    out: dict[str, str] = {}
    for label, spec in specs():
        for cloud, module in MODULES.items():
            for fname, fn in inspect.getmembers(module, inspect.isfunction):
                if fname.startswith("_") or fn.__module__ != module.__name__:
                    continue
                calls = _calls(fn, spec)
                for key, args in calls or ():
                    out[f"{cloud}.{fname}({label};{key})"] = str(fn(*args))
    return out


if __name__ == "__main__":
    RECORDED.write_text(json.dumps(names(), indent=0, sort_keys=True) + "\n")
    sys.stdout.write(f"{RECORDED}: {len(names())} names\n")
