"""Cloud-init user-data that every VM of a pool boots with, identical across clouds.

The document writes the pool's vmconfig manifest and the helper that reads it (`vmconfig`), installs
exactly the pinned Docker packages (sha256-checked, failing closed), creates the `nginx-on-zop-net`
bridge network, runs NGINX by digest on it (`nginx` bootstrap mode only) and writes the sentinel last.
The control plane polls for the sentinel through the exec channel (`SENTINEL_CHECK_COMMAND`) to move
a VM from `bootstrap` to `ready`.

The spec's `runtime` settings (env/files) are deliberately NOT rendered here: they are pushed later
through the exec channel, so changing them never changes user-data and never requires replacing VMs.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

import yaml

from vmplane.bootstrap.guest import GuestAddon
from vmplane.bootstrap.vmconfig import (
    BOOTSTRAP_LOG_PATH,
    FAILURE_LINES,
    HELPER_PATH,
    PACKAGE_DIR,
    VMCONFIG_PATH,
    gz_b64,
    helper_source,
    pool_manifest,
)
from vmplane.deps.manifest import Manifest
from vmplane.envspec.models import SENTINEL_PATH, BootstrapMode, EnvSpec

NETWORK_NAME = "nginx-on-zop-net"
NGINX_CONTAINER_NAME = "zop-nginx"
HEALTHZ_PATH = "/healthz"
BOOTSTRAP_SCRIPT_PATH = "/usr/local/lib/vmplane/bootstrap.sh"
IDENTITY_PATH = "/etc/vmplane/identity.json"
# A directory (not a single file) is mounted so operators can drop extra server blocks next to ours
# and `nginx -s reload`; a single-file bind mount would also pin the old inode on replacement.
NGINX_CONF_DIR = "/etc/vmplane/nginx/conf.d"
NGINX_CONF_PATH = f"{NGINX_CONF_DIR}/default.conf"
RETRY_ATTEMPTS = 6  # backoff 2+4+8+16+32 s: enough for NAT egress to come up after boot

# Sent through the exec channel: exit 0 once the sentinel exists and is non-empty; otherwise it prints
# the bootstrap's failure lines (which artifact was unpinned or mismatched), for the step's error.
SENTINEL_CHECK_COMMAND: str = f"test -s {shlex.quote(SENTINEL_PATH)} || {{ {FAILURE_LINES}; exit 1; }}"

NGINX_DEFAULT_CONF = f"""\
# Written by vmplane cloud-init. Default server: answers the load balancer's health check,
# 404 for everything else until workloads add their own server blocks.
server {{
    listen 80 default_server;
    server_name _;

    location = {HEALTHZ_PATH} {{
        access_log off;
        default_type text/plain;
        return 200 "ok";
    }}

    location / {{
        return 404;
    }}
}}
"""

# Values that tests (and operators debugging a VM) may override through the environment; the
# defaults are the real paths. Mode, names and image are baked in at render time.
_SCRIPT_TEMPLATE = """\
#!/bin/bash
# vmplane bootstrap (rendered for mode: @MODE@). Every step is idempotent: a re-run is harmless.
# Runtime env/files are not here: they are pushed through the exec channel after bootstrap.
set -euo pipefail
# Let the ERR trap fire inside functions too, so every failure is logged with its line.
set -o errtrace

BOOTSTRAP_MODE=@MODE@
NETWORK_NAME=@NETWORK@
NGINX_CONTAINER=@CONTAINER@
RETRY_ATTEMPTS=@ATTEMPTS@
SENTINEL_PATH="${VMPLANE_SENTINEL_PATH:-@SENTINEL@}"
LOG_PATH="${VMPLANE_LOG_PATH:-@LOG@}"
NGINX_CONF_DIR="${VMPLANE_NGINX_CONF_DIR:-@CONF_DIR@}"
VMCONFIG_PATH="${VMPLANE_VMCONFIG_PATH:-@VMCONFIG@}"
VMCONFIG_HELPER="${VMPLANE_VMCONFIG_HELPER:-@HELPER@}"
PACKAGE_DIR="${VMPLANE_PACKAGE_DIR:-@PACKAGE_DIR@}"

mkdir -p "$(dirname "$LOG_PATH")"
# Keep stdout too so the output also lands in cloud-init-output.log.
exec > >(tee -a "$LOG_PATH") 2>&1

log() { printf '%s vmplane-bootstrap: %s\\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*"; }
trap 'log "FAILED at line $LINENO: $BASH_COMMAND (exit $?); sentinel not written"' ERR

# Retry with exponential backoff: NAT egress may not be usable for a while after boot.
retry() {
  local attempt=1 delay=2
  until "$@"; do
    if (( attempt >= RETRY_ATTEMPTS )); then
      log "giving up after $attempt attempts: $*"
      return 1
    fi
    log "attempt $attempt failed: $*; retrying in ${delay}s"
    sleep "$delay"
    attempt=$((attempt + 1))
    delay=$((delay * 2))
  done
}

# Fail closed: the helper names the unpinned, unreachable or mismatching artifact and no sentinel is written.
fetch_pinned() {
  log "fetching the pinned packages of $VMCONFIG_PATH"
  if ! python3 "$VMCONFIG_HELPER" fetch "$VMCONFIG_PATH" "$PACKAGE_DIR"; then
    log "FAILED: a pinned artifact is unavailable (the vmconfig line above names it); sentinel not written"
    exit 1
  fi
}

install_docker() {
  # An image that ships Docker keeps it: installing the pinned packages over another build (docker-ce
  # over docker.io) would conflict, and the image's maker chose it. Its version is logged, so a drift
  # from the manifest's pins shows in the log.
  if command -v docker >/dev/null 2>&1; then
    log "docker already installed, kept: $(docker --version 2>&1 || true)"
    return 0
  fi
  local pm name version file i got
  local names=() versions=() files=()
  {
    read -r pm
    while IFS=$'\\t' read -r name version file; do
      names+=("$name"); versions+=("$version"); files+=("$file")
    done
  } <"$PACKAGE_DIR/install.list"
  # Exactly the verified files; the package manager resolves only the base libraries they need.
  case "$pm" in
    apt)
      export DEBIAN_FRONTEND=noninteractive
      # The lock timeout waits out unattended-upgrades, which often holds the lock at first boot.
      retry apt-get -o DPkg::Lock::Timeout=300 update
      retry apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends "${files[@]}"
      ;;
    dnf) retry dnf install -y "${files[@]}" ;;
    *)
      log "FAILED: unknown package manager '$pm' in $VMCONFIG_PATH; sentinel not written"
      exit 1
      ;;
  esac
  for i in "${!names[@]}"; do
    if [[ "$pm" == apt ]]; then
      got="$(dpkg-query -W -f='${Version}' "${names[i]}")"
    else
      got="$(rpm -q --qf '%|EPOCH?{%{EPOCH}:}:{}|%{VERSION}-%{RELEASE}' "${names[i]}")"
    fi
    if [[ "$got" != "${versions[i]}" ]]; then
      log "FAILED: ${names[i]} is installed at version $got, the manifest pins ${versions[i]}; sentinel not written"
      exit 1
    fi
  done
  log "installed the pinned packages: ${names[*]}"
  hash -r
}

start_docker() {
  systemctl enable --now docker
  # The daemon socket can lag behind systemctl returning; the version lands in the log.
  retry docker info --format '{{.ServerVersion}}'
}

create_network() {
  if docker network inspect "$NETWORK_NAME" >/dev/null 2>&1; then
    log "network $NETWORK_NAME already exists"
  else
    log "creating bridge network $NETWORK_NAME"
    docker network create --driver bridge "$NETWORK_NAME"
  fi
}

run_nginx() {
  # By digest: the container check below compares against the same reference.
  local NGINX_IMAGE
  NGINX_IMAGE="$(python3 "$VMCONFIG_HELPER" image "$VMCONFIG_PATH")"
  retry docker pull "$NGINX_IMAGE"
  local current
  if current="$(docker container inspect -f '{{.Config.Image}}' "$NGINX_CONTAINER" 2>/dev/null)"; then
    if [[ "$current" == "$NGINX_IMAGE" ]]; then
      log "container $NGINX_CONTAINER exists; making sure it runs"
      docker start "$NGINX_CONTAINER" >/dev/null
    else
      log "replacing $NGINX_CONTAINER ($current -> $NGINX_IMAGE)"
      docker rm -f "$NGINX_CONTAINER" >/dev/null
      current=""
    fi
  fi
  if [[ -z "${current:-}" ]]; then
    log "starting $NGINX_CONTAINER"
    docker run -d --name "$NGINX_CONTAINER" --network "$NETWORK_NAME" --restart unless-stopped \\
      -p 80:80 --log-opt max-size=10m --log-opt max-file=3 \\
      -v "$NGINX_CONF_DIR:/etc/nginx/conf.d:ro" "$NGINX_IMAGE" >/dev/null
  fi
  # Ready means serving: wait until the health endpoint answers inside the container.
  retry docker exec "$NGINX_CONTAINER" wget -q -O /dev/null http://127.0.0.1@HEALTHZ@
}

write_sentinel() {
  mkdir -p "$(dirname "$SENTINEL_PATH")"
  local tmp
  tmp="$(mktemp "$SENTINEL_PATH.XXXXXX")"
  printf '{"completedAt": "%s", "mode": "%s"}\\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$BOOTSTRAP_MODE" >"$tmp"
  chmod 0644 "$tmp"
  # Atomic rename: a poller never sees a half-written sentinel.
  mv -f "$tmp" "$SENTINEL_PATH"
}

log "bootstrap starting (mode $BOOTSTRAP_MODE)"
fetch_pinned
install_docker
start_docker
create_network
if [[ "$BOOTSTRAP_MODE" == nginx ]]; then
  run_nginx
else
  log "bare mode: skipping nginx"
fi
write_sentinel
log "bootstrap complete; sentinel at $SENTINEL_PATH"
"""


def render_bootstrap_script(mode: BootstrapMode) -> str:
    """The bash script cloud-init writes to `BOOTSTRAP_SCRIPT_PATH` and runs once per instance."""
    values = {
        "@MODE@": shlex.quote(BootstrapMode(mode).value),
        "@NETWORK@": shlex.quote(NETWORK_NAME),
        "@CONTAINER@": shlex.quote(NGINX_CONTAINER_NAME),
        "@ATTEMPTS@": str(RETRY_ATTEMPTS),
        # These sit inside double quotes (for the ${VAR:-default} override), so must not need quoting.
        "@SENTINEL@": _plain_path(SENTINEL_PATH),
        "@LOG@": _plain_path(BOOTSTRAP_LOG_PATH),
        "@CONF_DIR@": _plain_path(NGINX_CONF_DIR),
        "@HEALTHZ@": _plain_path(HEALTHZ_PATH),
        "@VMCONFIG@": _plain_path(VMCONFIG_PATH),
        "@HELPER@": _plain_path(HELPER_PATH),
        "@PACKAGE_DIR@": _plain_path(PACKAGE_DIR),
    }
    script = _SCRIPT_TEMPLATE
    for marker, value in values.items():
        script = script.replace(marker, value)
    return script


def render_user_data(
    spec: EnvSpec, pool_name: str, manifest: Manifest | None = None, *, manifest_content: str | None = None
) -> str:
    """The `#cloud-config` document for every VM of `pool_name`; deterministic byte-for-byte.
    `manifest`: the pool's vmconfig manifest (default: the cache's current one). `manifest_content`
    replaces its gz+b64 text (the Terraform stack puts an expression reading its copy there)."""
    if pool_name not in spec.pools:
        known = ", ".join(sorted(spec.pools))
        raise ValueError(f"unknown pool {pool_name!r} in env {spec.name!r} (pools: {known})")
    pool = spec.pools[pool_name]
    mode = spec.bootstrap.mode
    if manifest is None:
        manifest = pool_manifest(spec, pool_name)

    identity = {"arch": pool.arch.value, "env": spec.name, "pool": pool_name}
    write_files: list[dict[str, Any]] = [
        _file(IDENTITY_PATH, json.dumps(identity, indent=2, sort_keys=True) + "\n", "0644"),
    ]
    if mode == BootstrapMode.nginx:
        write_files.append(_file(NGINX_CONF_PATH, NGINX_DEFAULT_CONF, "0644"))
    # Compressed: EC2 takes 16 KB of user-data, and the manifest grows with the pinned families (the
    # files are on the VM, and the script is `render_bootstrap_script`, to read).
    content = manifest_content if manifest_content is not None else gz_b64(manifest.dumps())
    write_files.append(_encoded(VMCONFIG_PATH, content, "0644"))
    write_files.append(_encoded(HELPER_PATH, gz_b64(helper_source()), "0644"))
    write_files.append(_encoded(BOOTSTRAP_SCRIPT_PATH, gz_b64(render_bootstrap_script(mode)), "0755"))
    runcmd: list[list[str]] = [["/bin/bash", BOOTSTRAP_SCRIPT_PATH]]
    guest = _guest_of(spec)
    if guest is not None:
        # The cloud's guest side (Google Cloud: the sentinel reported through guest attributes, the exec agent).
        write_files.extend(_file(path, content, perms) for path, content, perms in guest.files())
        runcmd = guest.runcmd(runcmd[0])

    config: dict[str, Any] = {
        # No SSH access at all: interactive access is only through the IAM-gated exec channel.
        "ssh_pwauth": False,
        "disable_root": True,
        "write_files": write_files,
        # Invoked through bash so a noexec mount or lost mode bit cannot break the bootstrap.
        "runcmd": runcmd,
    }
    header = (
        "#cloud-config\n"
        f"# vmplane bootstrap: env {spec.name}, pool {pool_name}, mode {mode.value}.\n"
        "# Runtime env/files are not in user-data: they are pushed through the exec channel,\n"
        "# so changing them never requires replacing VMs.\n"
    )
    body = yaml.dump(config, Dumper=_Dumper, sort_keys=True, default_flow_style=False, width=1000)
    return header + body


def _guest_of(spec: EnvSpec) -> GuestAddon | None:
    # The cloud's descriptor says. Imported here: the registry is a layer above the bootstrap (its drivers
    # import this module), and every caller (drivers, validate, the Terraform stack) must get the same files.
    from vmplane.clouds.registry import descriptor_for

    make = descriptor_for(spec.provider.cloud).guest
    return make() if make is not None else None


def check_user_data_size(user_data: str, limit: int) -> None:
    """Raise ValueError when the raw user-data exceeds a cloud's limit (`limit` bytes, before base64);
    stepValidate checks it with the driver's limit, so nothing is created for an oversized bootstrap."""
    size = len(user_data.encode("utf-8"))
    if size > limit:
        raise ValueError(f"user-data is {size} bytes, over the {limit}-byte limit")


class _Literal(str):
    """A string dumped as a YAML literal block so the embedded files stay readable in the console."""


class _Dumper(yaml.SafeDumper):
    """SafeDumper plus literal blocks; a subclass so the global SafeDumper is left untouched."""


def _literal_representer(dumper: yaml.SafeDumper, data: _Literal) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", str(data), style="|")


_Dumper.add_representer(_Literal, _literal_representer)


def _file(path: str, content: str, permissions: str) -> dict[str, Any]:
    return {"path": path, "content": _Literal(content), "owner": "root:root", "permissions": permissions}


def _encoded(path: str, content: str, permissions: str) -> dict[str, Any]:
    return {"path": path, "content": content, "encoding": "gz+b64", "owner": "root:root", "permissions": permissions}


def _plain_path(value: str) -> str:
    if shlex.quote(value) != value:
        raise ValueError(f"{value!r} must not need shell quoting")
    return value
