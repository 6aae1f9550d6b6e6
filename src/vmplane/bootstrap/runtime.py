"""Runtime settings (`runtime.env`, `runtime.files`) pushed to running VMs through the exec channel.

They are kept out of user-data on purpose: changing them must never need a new launch template version
or a VM replacement. The push is one idempotent shell script per environment: every file is written to a
temporary name beside its target and renamed over it (atomic for readers), the env file likewise, and
NGINX reloads when one of its files changed. A hash of the settings, recorded per VM, says which VMs
already have them.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shlex
from collections.abc import Mapping
from typing import Any

from vmplane.bootstrap.cloudinit import NGINX_CONF_DIR, NGINX_CONTAINER_NAME
from vmplane.envspec.models import BootstrapMode, EnvSpec
from vmplane.envspec.secrets import field_path, secret_refs

RUNTIME_ENV_PATH = "/etc/vmplane/runtime.env"
RUNTIME_HASH_PATH = "/etc/vmplane/runtime.sha256"


def runtime_hash(spec: EnvSpec, versions: Mapping[str, str | None] | None = None) -> str:
    # h-push's stand-in for h-fetch's signature (the refs' versions are in the hash); h-fetch's replaces it.
    runtime = spec.runtime.model_dump(mode="json", by_alias=True)
    doc: dict[str, Any] = {"env": runtime["env"], "files": runtime["files"], "mode": spec.bootstrap.mode.value}
    if versions:
        doc["versions"] = {r.text: versions.get(r.text) for r in secret_refs(spec).values()}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def _env_file(env: dict[str, str]) -> str:
    # One KEY=value per line (the format of docker --env-file and systemd EnvironmentFile=).
    return "".join(f"{k}={v}\n" for k, v in sorted(env.items()))


def _write(path: str, content: str, mode: str) -> list[str]:
    data = base64.b64encode(content.encode()).decode()
    q, tmp = shlex.quote(path), shlex.quote(f"{path}.vmplane-tmp")
    return [
        f"install -d -m 0755 {shlex.quote(path.rsplit('/', 1)[0] or '/')}",
        f"printf %s {data} | base64 -d > {tmp}",
        f"chmod {mode} {tmp}",
        f"if ! cmp -s {tmp} {q}; then mv -f {tmp} {q}; changed+=({q}); else rm -f {tmp}; fi",
    ]


def render_push_script(
    spec: EnvSpec,
    root: str = "",
    *,
    source: dict[str, Any] | None = None,
    env_values: Mapping[str, str] | None = None,
) -> str:
    """The script the exec channel runs on every VM; prints what changed, exits non-zero on failure.
    `root` prefixes every path (a staging directory instead of `/`, as the tests run it)."""
    lines = ["set -euo pipefail", "changed=()"]
    refs = secret_refs(spec)
    given = env_values or {}
    env = {**spec.runtime.plain_env()}
    for key in spec.runtime.env:
        if (ref := refs.get(field_path("env", key))) is not None and ref.text in given:
            env[key] = given[ref.text]
    lines += _write(root + RUNTIME_ENV_PATH, _env_file(env), "0600")
    for path, content in sorted(spec.runtime.plain_files().items()):
        lines += _write(root + path, content, "0644")
    if spec.bootstrap.mode is BootstrapMode.nginx:
        conf = shlex.quote(root + NGINX_CONF_DIR + "/")
        container = shlex.quote(NGINX_CONTAINER_NAME)
        lines.append(
            f'for f in "${{changed[@]}}"; do case "$f" in {conf}*) '
            f"docker exec {container} nginx -t && docker exec {container} nginx -s reload; break;; esac; done"
        )
    lines += [
        f"printf %s {runtime_hash(spec)} > {shlex.quote(root + RUNTIME_HASH_PATH)}",
        'echo "vmplane runtime: ${#changed[@]} file(s) changed${changed:+: ${changed[*]}}"',
    ]
    return "\n".join(lines) + "\n"
