"""The control plane's side of the VM's secret fetcher (guest_secrets_main.py): what the push ships.

The fetcher is shipped as gzip+base64 text (the exec channels carry at most 48 KiB), its plan holds only
references and where to reach the store (`SecretAccess.guest_source()`), and a systemd unit re-runs it at
every boot so a rebooted or replaced VM has its secrets before Docker starts its containers.
"""

from __future__ import annotations

import base64
import functools
import gzip
import json
from pathlib import Path
from typing import Any

from vmplane.envspec.models import EnvSpec
from vmplane.envspec.secrets import Secret, SecretRef, SecretStore

FETCHER_PATH = "/usr/local/lib/vmplane/fetch-secrets"
PLAN_PATH = "/etc/vmplane/secrets.json"
UNIT_NAME = "vmplane-secrets.service"
UNIT_DIR = "/etc/systemd/system"
# The stores the VM reads itself; `env:` values are sent by the control plane (Proxmox has no store).
FETCHED_STORES = frozenset({SecretStore.aws_sm, SecretStore.aws_ssm, SecretStore.gcp_sm})


@functools.cache
def fetcher_payload() -> str:
    """The fetcher's source, gzipped (mtime 0: the same bytes every time) and base64-encoded; without its
    shebang line, which the push writes naming the VM's own python3."""
    text = Path(__file__).with_name("guest_secrets_main.py").read_text()
    if text.startswith("#!"):
        text = text.split("\n", 1)[1]
    return base64.b64encode(gzip.compress(text.encode(), compresslevel=9, mtime=0)).decode()


def refs_by_kind(spec: EnvSpec) -> dict[str, dict[str, SecretRef]]:
    """`{"env": {VAR: ref}, "files": {path: ref}}` for every referenced secret."""
    return {
        kind: {k: v.ref for k, v in sorted(values.items()) if isinstance(v, Secret)}
        for kind, values in (("env", spec.runtime.env), ("files", spec.runtime.files))
    }


def fetched(spec: EnvSpec) -> bool:
    """Whether the VM reads some of the spec's secrets itself (so the push ships the fetcher)."""
    return any(ref.store in FETCHED_STORES for refs in refs_by_kind(spec).values() for ref in refs.values())


def _ref_doc(ref: SecretRef) -> dict[str, Any]:
    return {
        "ref": ref.text,
        "store": ref.store.value,
        "name": ref.name,
        "version": ref.version,
        "jsonKey": ref.json_key,
    }


def fetch_plan(spec: EnvSpec, source: dict[str, Any], env_path: str, root: str = "") -> dict[str, Any]:
    """The fetcher's input: references, the plain env values and where the store is; never a secret value."""
    refs = refs_by_kind(spec)
    if any(ref.store not in FETCHED_STORES for kind in refs.values() for ref in kind.values()):
        # percloud validation keeps `env:` (Proxmox) and the clouds' stores apart; a mix has no one sender.
        raise ValueError("runtime: env: references cannot be mixed with a cloud secret store's")
    return {
        "source": source,
        "envPath": env_path,
        "plainEnv": spec.runtime.plain_env(),
        "env": {var: _ref_doc(ref) for var, ref in refs["env"].items()},
        "files": {path: _ref_doc(ref) for path, ref in refs["files"].items()},
        "root": root,
    }


def plan_text(plan: dict[str, Any]) -> str:
    return json.dumps(plan, indent=1, sort_keys=True) + "\n"


def unit_text() -> str:
    """Fetches the secrets at every boot, before Docker starts the containers that read them. A failure
    does not block the boot: the unit fails (visible in `systemctl --failed`) and the next push retries."""
    return (
        "[Unit]\n"
        "Description=vmplane: fetch this VM's secrets from its cloud's store\n"
        "Wants=network-online.target\n"
        "After=network-online.target\n"
        "Before=docker.service\n\n"
        "[Service]\n"
        "Type=oneshot\n"
        "RemainAfterExit=yes\n"
        f"ExecStart={FETCHER_PATH} {PLAN_PATH}\n\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )


def sizing_source(spec: EnvSpec) -> dict[str, Any]:
    """A stand-in as large as a real guest source, for measuring the script before any driver is asked."""
    url = "https://" + "x" * 72
    return {
        "cloud": spec.provider.cloud.value,
        "region": "x" * 24,
        "project": "x" * 30,
        "endpoints": {"imds": url, "metadata": url, "secretsmanager": url, "ssm": url, "secretmanager": url},
    }
