"""Runtime settings (`runtime.env`, `runtime.files`) pushed to running VMs through the exec channel.

They are kept out of user-data on purpose: changing them must never need a new launch template version
or a VM replacement. The push is one idempotent shell script per environment: every file is written to a
temporary name beside its target and renamed over it (atomic for readers), the env file likewise, and
NGINX reloads when one of its files changed. A hash of the settings, recorded per VM, says which VMs
already have them.

Secrets (envspec/secrets.py) never travel in the script: for the clouds' stores it installs the fetcher
(guest_secrets_main.py), a plan of references and a boot unit, and runs the fetcher, which reads each value
with the VM's own identity and writes the env file and the secret files 0600. `env:` values (Proxmox, no
store) are the exception: the push reads them from the operator's environment and they are written inline,
0600, like plain values.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shlex
from collections.abc import Mapping
from typing import Any

from vmplane.bootstrap import guest_secrets as gs
from vmplane.bootstrap.cloudinit import NGINX_CONF_DIR, NGINX_CONTAINER_NAME
from vmplane.envspec.models import BootstrapMode, EnvSpec
from vmplane.envspec.secrets import SecretRef, field_path, secret_refs

RUNTIME_ENV_PATH = "/etc/vmplane/runtime.env"
RUNTIME_HASH_PATH = "/etc/vmplane/runtime.sha256"
# Decodes the shipped fetcher with the interpreter that will run it (no gzip binary assumed).
_UNPACK = "import base64,gzip,sys; sys.stdout.buffer.write(gzip.decompress(base64.b64decode(sys.stdin.read())))"


def runtime_hash(spec: EnvSpec, versions: Mapping[str, str | None] | None = None) -> str:
    """What a VM that has the current settings recorded. It covers the references and, when there are
    any, their current versions (`SecretAccess.versions`, by ref text): a new version of an unpinned
    secret makes every VM stale. Settings without secrets hash as they always did."""
    runtime = spec.runtime.model_dump(mode="json", by_alias=True)
    doc: dict[str, Any] = {"env": runtime["env"], "files": runtime["files"], "mode": spec.bootstrap.mode.value}
    if refs := secret_refs(spec):
        doc["versions"] = {ref.text: (versions or {}).get(ref.text) for ref in refs.values()}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def _env_file(env: dict[str, str]) -> str:
    # One KEY=value per line (the format of docker --env-file and systemd EnvironmentFile=).
    return "".join(f"{k}={v}\n" for k, v in sorted(env.items()))


def _install(path: str, produce: str, mode: str, *, track: bool = True) -> list[str]:
    """Write `produce`'s output to a temporary file beside `path`, then rename it over `path` if it differs;
    `track`: list it in `changed` (the runtime settings, not vmplane's own machinery)."""
    q, tmp = shlex.quote(path), shlex.quote(f"{path}.vmplane-tmp")
    record = f"; changed+=({q})" if track else ""
    return [
        f"install -d -m 0755 {shlex.quote(path.rsplit('/', 1)[0] or '/')}",
        f"{produce} > {tmp}",
        f"chmod {mode} {tmp}",
        f"if ! cmp -s {tmp} {q}; then mv -f {tmp} {q}{record}; else rm -f {tmp}; fi",
    ]


def _write(path: str, content: str, mode: str, *, track: bool = True) -> list[str]:
    data = base64.b64encode(content.encode()).decode()
    return _install(path, f"printf %s {data} | base64 -d", mode, track=track)


def _sent_values(kind: str, refs: dict[str, SecretRef], env_values: Mapping[str, str] | None) -> dict[str, str]:
    """The `env:` values the push read from the operator's environment, by key."""
    out = {}
    for key, ref in refs.items():
        if env_values is not None and ref.text not in env_values:
            raise ValueError(f"{field_path(kind, key)}: {ref.text} was not read from the environment")
        out[key] = (env_values or {}).get(ref.text, "")
    if kind == "env" and (bad := sorted(k for k, v in out.items() if "\n" in v or "\r" in v)):
        raise ValueError(f"{field_path(kind, bad[0])}: the value of {refs[bad[0]].text} spans lines")
    return out


def _fetch_lines(spec: EnvSpec, root: str, source: dict[str, Any]) -> list[str]:
    """Install the fetcher, its plan and the boot unit; run the fetcher and add what it changed."""
    fetcher, plan = shlex.quote(root + gs.FETCHER_PATH), shlex.quote(root + gs.PLAN_PATH)
    unit_dir = root + gs.UNIT_DIR
    wants = shlex.quote(f"{unit_dir}/multi-user.target.wants")
    unpack = f'{{ printf \'#!%s\\n\' "$py"; printf %s {gs.fetcher_payload()} | "$py" -c {shlex.quote(_UNPACK)}; }}'
    lines = [
        'py=$(command -v python3) || { echo "vmplane runtime: python3 is needed on the VM to read its secrets" >&2; '
        "exit 1; }",
        *_install(root + gs.FETCHER_PATH, unpack, "0700", track=False),
        *_write(
            root + gs.PLAN_PATH, gs.plan_text(gs.fetch_plan(spec, source, RUNTIME_ENV_PATH, root)), "0600", track=False
        ),
        # The boot unit, enabled the way `systemctl enable` does it (a link), not started: the push runs
        # the fetcher itself. Where there is no systemd the VM still gets its secrets from this push.
        f"if [ -d {shlex.quote(unit_dir)} ]; then",
        *_write(f"{unit_dir}/{gs.UNIT_NAME}", gs.unit_text(), "0644", track=False),
        f"install -d -m 0755 {wants}",
        f"ln -sfn {shlex.quote(f'{gs.UNIT_DIR}/{gs.UNIT_NAME}')} {wants}/{gs.UNIT_NAME}",
        *(["if [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi"] if not root else []),
        "fi",
        f"fetched=$({fetcher} {plan})",
        'while IFS= read -r p; do if [ -n "$p" ]; then changed+=("$p"); fi; done <<< "$fetched"',
    ]
    return lines


def _remove_fetcher(root: str) -> str:
    """Once no secret is fetched any more, the boot unit must not rewrite the env file from an old plan."""
    unit_dir = root + gs.UNIT_DIR
    paths = [
        root + gs.FETCHER_PATH,
        root + gs.PLAN_PATH,
        f"{unit_dir}/{gs.UNIT_NAME}",
        f"{unit_dir}/multi-user.target.wants/{gs.UNIT_NAME}",
    ]
    return "rm -f " + " ".join(shlex.quote(p) for p in paths)


def render_push_script(
    spec: EnvSpec,
    root: str = "",
    *,
    source: dict[str, Any] | None = None,
    env_values: Mapping[str, str] | None = None,
    versions: Mapping[str, str | None] | None = None,
) -> str:
    """The script the exec channel runs on every VM; prints what changed, exits non-zero on failure.
    `root` prefixes every path (a staging directory instead of `/`, as the tests run it). `source` is the
    driver's `SecretAccess.guest_source()`, needed when the VM reads secrets from its cloud's store;
    `env_values` maps each `env:` reference's text to the value read at push time; `versions` is what
    `runtime_hash` takes, so the VM's /etc/vmplane/runtime.sha256 is the hash vmplane records for it.

    Without them the script is rendered for measuring only (`runtime_script_problem`): the same size
    within a few bytes, but it refuses to run rather than write empty or unreachable secrets."""
    # umask 077: every temporary file starts root-only, before its chmod (an env: value is in one).
    lines = ["set -euo pipefail", "umask 077", "changed=()"]
    refs = gs.refs_by_kind(spec)
    sent = {
        kind: {k: r for k, r in kind_refs.items() if r.store not in gs.FETCHED_STORES}
        for kind, kind_refs in refs.items()
    }
    if (gs.fetched(spec) and source is None) or (env_values is None and any(sent.values())):
        lines.append('echo "vmplane runtime: rendered for measuring only (no secret source or values)" >&2; exit 1')
    for path, content in sorted(spec.runtime.plain_files().items()):
        lines += _write(root + path, content, "0644")
    for path, value in sorted(_sent_values("files", sent["files"], env_values).items()):
        lines += _write(root + path, value, "0600")
    if gs.fetched(spec):
        lines += _fetch_lines(spec, root, source if source is not None else gs.sizing_source(spec))
    else:
        env = spec.runtime.plain_env() | _sent_values("env", sent["env"], env_values)
        lines += _write(root + RUNTIME_ENV_PATH, _env_file(env), "0600")
        lines.append(_remove_fetcher(root))
    if spec.bootstrap.mode is BootstrapMode.nginx:
        conf = shlex.quote(root + NGINX_CONF_DIR + "/")
        container = shlex.quote(NGINX_CONTAINER_NAME)
        lines.append(
            f'for f in "${{changed[@]}}"; do case "$f" in {conf}*) '
            f"docker exec {container} nginx -t && docker exec {container} nginx -s reload; break;; esac; done"
        )
    lines += [
        f"printf %s {runtime_hash(spec, versions)} > {shlex.quote(root + RUNTIME_HASH_PATH)}",
        'echo "vmplane runtime: ${#changed[@]} file(s) changed${changed:+: ${changed[*]}}"',
    ]
    return "\n".join(lines) + "\n"
