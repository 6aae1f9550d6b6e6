"""The guest side of vmplane on Google Cloud, added to a `gcp` spec's cloud-init user-data:

- `report-ready.sh`: after the bootstrap wrote the sentinel, sets guest attribute `vmplane/bootstrap =
  ready` through the metadata server (what the driver's readiness poll reads); again at every later boot;
- `vmplane-mailbox`: a systemd unit running a small shell agent that long-polls instance metadata
  `vmplane-exec` (`wait_for_change`, with the last etag), runs the script it carries under `timeout`
  and answers guest attribute `vmplane-exec/<id>` = `{"exitCode", "stdout", "stderr"}`.

The agent is at-most-once: an id is written to its `seen` file before the script runs, so a restart
(or the same message read again) never runs a command twice. It is started before the bootstrap so a
failed bootstrap can still be inspected through `vmplane exec`. JSON and base64 go through python3
(in Debian's and Ubuntu's cloud images); everything else is bash and curl.
"""

from __future__ import annotations

from vmplane.bootstrap.vmconfig import BOOTSTRAP_LOG_PATH, FAILURE_LINES
from vmplane.envspec.models import SENTINEL_PATH

METADATA_URL = "http://metadata.google.internal/computeMetadata/v1"
AGENT_PATH = "/usr/local/lib/vmplane/mailbox.sh"
REPORT_PATH = "/usr/local/lib/vmplane/report-ready.sh"
UNIT_NAME = "vmplane-mailbox.service"
UNIT_PATH = f"/etc/systemd/system/{UNIT_NAME}"
STATE_DIR = "/var/lib/vmplane/mailbox"
# Each of stdout/stderr is cut to its last 8 KiB so the answer stays well inside a guest attribute
# value (conservative: the documented limit was not verified here).
MAX_OUTPUT_BYTES = 8 * 1024
MAILBOX_KEY = "vmplane-exec"

REPORT_SCRIPT = f"""\
#!/bin/bash
# vmplane: report the bootstrap sentinel to the control plane (guest attribute vmplane/bootstrap).
set -uo pipefail
SENTINEL_PATH="${{VMPLANE_SENTINEL_PATH:-{SENTINEL_PATH}}}"
MD="${{VMPLANE_METADATA_URL:-{METADATA_URL}}}"
LOG_PATH="${{VMPLANE_LOG_PATH:-{BOOTSTRAP_LOG_PATH}}}"
if [[ ! -s "$SENTINEL_PATH" ]]; then
  echo "vmplane: no sentinel at $SENTINEL_PATH (bootstrap failed); not reporting ready" >&2
  # What failed (e.g. the artifact the vmconfig helper found unpinned), for the control plane's error.
  why="$({FAILURE_LINES.replace(BOOTSTRAP_LOG_PATH, '"$LOG_PATH"')})"
  curl -s -f -X PUT -H 'Metadata-Flavor: Google' --data "${{why:-bootstrap failed}}" \
    "$MD/instance/guest-attributes/vmplane/bootstrap-failed" || true
  exit 1
fi
for attempt in 1 2 3 4 5 6; do
  if curl -s -f -X PUT -H 'Metadata-Flavor: Google' --data ready "$MD/instance/guest-attributes/vmplane/bootstrap"; then
    exit 0
  fi
  sleep $((attempt * 2))
done
echo "vmplane: could not write guest attribute vmplane/bootstrap" >&2
exit 1
"""

AGENT_SCRIPT = f"""\
#!/bin/bash
# vmplane-mailbox: runs the script vmplane puts in instance metadata {MAILBOX_KEY} and answers in
# guest attribute {MAILBOX_KEY}/<id>. At most once per id (the seen file survives restarts).
set -uo pipefail
MD="${{VMPLANE_METADATA_URL:-{METADATA_URL}}}"
STATE_DIR="${{VMPLANE_MAILBOX_DIR:-{STATE_DIR}}}"
ONCE="${{VMPLANE_MAILBOX_ONCE:-}}"
MAX_OUTPUT={MAX_OUTPUT_BYTES}
WORK="$STATE_DIR/work"
SEEN="$STATE_DIR/seen"
mkdir -p "$WORK"
chmod 0700 "$STATE_DIR"
touch "$SEEN"

log() {{ printf 'vmplane-mailbox: %s\\n' "$*" >&2; }}

# Message JSON {{"id", "script" (base64), "timeout"}} -> WORK/id, WORK/timeout, WORK/script.
decode() {{
  python3 - "$1" "$WORK" <<'PY'
import base64, json, sys
msg = json.load(open(sys.argv[1]))
mid = str(msg["id"])
if not mid.isalnum():
    raise SystemExit("message id must be alphanumeric")
open(sys.argv[2] + "/id", "w").write(mid)
open(sys.argv[2] + "/timeout", "w").write(str(max(1, int(msg.get("timeout", 60)))))
open(sys.argv[2] + "/script", "wb").write(base64.b64decode(msg["script"]))
PY
}}

# The answer JSON: the exit code and the last MAX_OUTPUT bytes of stdout and of stderr.
encode() {{
  python3 - "$1" "$WORK" "$MAX_OUTPUT" <<'PY'
import json, sys
code, work, limit = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
def tail(name):
    data = open(f"{{work}}/{{name}}", "rb").read()
    return data[-limit:].decode("utf-8", "replace")
print(json.dumps({{"exitCode": code, "stdout": tail("stdout"), "stderr": tail("stderr")}}))
PY
}}

handle() {{
  local id limit code
  if ! decode "$1"; then
    log "unreadable message; ignored"
    return 0
  fi
  id="$(cat "$WORK/id")"
  if grep -qxF "$id" "$SEEN"; then
    return 0
  fi
  echo "$id" >>"$SEEN"
  limit="$(cat "$WORK/timeout")"
  log "running $id (timeout ${{limit}}s)"
  timeout --kill-after=10 "$limit" /bin/bash "$WORK/script" >"$WORK/stdout" 2>"$WORK/stderr" </dev/null
  code=$?
  encode "$code" >"$WORK/answer"
  curl -s -f -X PUT -H 'Metadata-Flavor: Google' --data-binary "@$WORK/answer" \\
    "$MD/instance/guest-attributes/{MAILBOX_KEY}/$id" || log "could not answer $id"
}}

etag=0
while true; do
  if curl -s -f -D "$WORK/headers" -o "$WORK/message" -H 'Metadata-Flavor: Google' \\
    "$MD/instance/attributes/{MAILBOX_KEY}?wait_for_change=true&timeout_sec=300&last_etag=$etag"; then
    etag="$(awk 'tolower($1) == "etag:" {{ print $2 }}' "$WORK/headers" | tr -d '\\r')"
    etag="${{etag:-0}}"
    handle "$WORK/message"
  else
    [[ -n "$ONCE" ]] && exit 1
    sleep 5 # no message yet (404 until the first command) or the metadata server is restarting
  fi
  [[ -n "$ONCE" ]] && exit 0
done
"""

UNIT = f"""\
[Unit]
Description=vmplane exec mailbox (instance metadata {MAILBOX_KEY} -> guest attributes)
Wants=network-online.target
After=network-online.target

[Service]
# Every boot after the first (a VM started again by `vmplane start` or its schedule) reports ready from
# the sentinel the first boot wrote: the readiness check after a start must not depend on Google keeping
# guest attributes across a stop. On the first boot there is no sentinel yet and this does nothing.
ExecStartPre=-/bin/bash {REPORT_PATH}
ExecStart=/bin/bash {AGENT_PATH}
Restart=always
RestartSec=5

[Install]
WantedBy=multi-user.target
"""


def guest_files() -> list[tuple[str, str, str]]:
    """(path, content, permissions) of the files cloud-init writes on a GCP VM."""
    return [(AGENT_PATH, AGENT_SCRIPT, "0755"), (REPORT_PATH, REPORT_SCRIPT, "0755"), (UNIT_PATH, UNIT, "0644")]


def guest_runcmd(bootstrap: list[str]) -> list[list[str]]:
    """The runcmd around the shared bootstrap: the mailbox first (a failed bootstrap stays inspectable),
    the ready report last (it checks the sentinel itself: runcmd goes on after a failed command)."""
    return [
        ["systemctl", "daemon-reload"],
        ["systemctl", "enable", "--now", UNIT_NAME],
        bootstrap,
        ["/bin/bash", REPORT_PATH],
    ]
