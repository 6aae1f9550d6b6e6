"""What the Proxmox CLI tests share: the real `vmplane` CLI in a subprocess with the fake's API token in
its environment (never `--sandbox`: fakepve is a Proxmox VE API, not vmplane's sandbox), and
examples/proxmox.jsonc pointed at a running fake."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests import deps_servers
from tests.helpers import EXAMPLES, Cli, free_port
from tests.proxmox.fakecluster import TEMPLATE_NAME, Serving, token_env

from vmplane.envspec.load import load_spec

EXAMPLE = "proxmox.jsonc"


@dataclass
class PveCli(Cli):
    """A Cli whose every run carries `token` (PROXMOX_TOKEN_ID/SECRET) in its environment, and no other:
    a token set in the test's own environment (a developer's real one) never reaches the CLI."""

    token: dict[str, str] = field(default_factory=dict)
    mirrors: str = ""  # VMPLANE_DEPS_MIRRORS

    @property
    def env(self) -> dict[str, str]:
        env = {**{k: v for k, v in super().env.items() if not k.startswith("PROXMOX_")}, **self.token}
        return {**env, "VMPLANE_DEPS_MIRRORS": self.mirrors} if self.mirrors else env


_DEPS: list[tuple[Any, deps_servers.Fake]] = []  # (the context kept alive, the fake)


def deps_fake() -> deps_servers.Fake:
    """This process's fake upstreams (tests/deps_servers.py: apt, AL2023, the registry), started once and
    served until the process ends (a daemon thread)."""
    if not _DEPS:
        serving = deps_servers.serve("amd64")
        _DEPS.append((serving, serving.__enter__()))
    return _DEPS[0][1]


def pve_cli(tmp_path: Path, *, token: bool = True) -> PveCli:
    """A CLI with a fresh home of its own and the shipped manifests. fakepve is a real cloud to vmplane
    (not its sandbox), so the first `plan`/`apply` fetches what the shipped manifest leaves unpinned (the
    NGINX image; the template's family is unknown before boot) as on a real site, here from the fake
    registry (VMPLANE_DEPS_MIRRORS): nothing boots on the fake, so its digest is as good as Docker Hub's."""
    # No AWS sandbox runs for these tests: the port is only a value the CLI never dials.
    return PveCli(
        home=tmp_path / "home",
        sandbox_port=free_port(),
        token=token_env() if token else {},
        mirrors=deps_fake().mirrors(),
    )


def write_pve_env(
    tmp_path: Path,
    serving: Serving,
    name: str,
    *,
    nodes: tuple[str, ...] = ("pve1",),
    example: str = EXAMPLE,
    **overrides: Any,
) -> Path:
    """examples/proxmox.jsonc (or another Proxmox `example`) renamed, aimed at the fake (its URL, its CA
    certificate, its nodes) and cloning the fake's template; `overrides` replace top-level members."""
    spec = load_spec(EXAMPLES / example).model_dump(mode="json", by_alias=True, exclude_none=True)
    provider = {"cloud": "proxmox", "endpoint": serving.pve.url, "nodes": list(nodes)}
    provider["caFile"] = serving.cafile  # type: ignore[attr-defined]
    spec.update(name=name, provider=provider)
    for pool in spec["pools"].values():
        pool["template"] = TEMPLATE_NAME
        pool.pop("image", None)  # a label derived from the template: derived again from the new one
    spec.update(overrides)
    path = tmp_path / f"{name}.jsonc"
    path.write_text(json.dumps(spec, indent=2))
    return path


def mutating(serving: Serving) -> list[tuple[str, str]]:
    """Every request the fake saw that could change something (anything but GET), as (method, path)."""
    return [(m, p) for m, p, _ in serving.run(lambda: list(serving.pve.requests)) if m != "GET"]
