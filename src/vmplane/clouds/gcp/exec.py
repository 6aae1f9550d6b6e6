"""The IAM-gated exec channel on GCP (`OSConfig` mode): a metadata mailbox answered through guest
attributes. No SSH keys, no open port needed.

The driver sets instance metadata `vmplane-exec` = `{"id", "script" (base64 bash), "timeout"}`; the
`vmplane-mailbox` agent on the VM (bootstrap/gcp_guest.py) long-polls that key, runs the script and
answers guest attribute `vmplane-exec/<id>` = `{"exitCode", "stdout", "stderr"}`. Setting metadata
needs compute.instances.setMetadata on the VM: that IAM permission is the gate.

One mailbox per VM: a second command sent before the agent read the first replaces it (the first then
times out). vmplane sends one command per VM at a time.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
import weakref
from functools import partial
from typing import Any

from vmplane.clouds.base import CommandResult, CommandStatus, SessionHint
from vmplane.clouds.errors import ConflictError, InvalidRequestError, NotFoundError
from vmplane.clouds.gcp import operations
from vmplane.clouds.gcp.capabilities import EXEC_SCRIPT_BYTES
from vmplane.clouds.gcp.readiness import guest_attributes
from vmplane.clouds.gcp.session import CALL_TIMEOUT, GcpClients

# The script travels base64 in one metadata value (256 KB max); vmplane keeps AWS's 48 KiB so every
# channel takes the same payloads.
MAX_SCRIPT_BYTES = EXEC_SCRIPT_BYTES
MAILBOX_KEY = "vmplane-exec"
NAMESPACE = "vmplane-exec"
TIMED_OUT_EXIT = 124  # what `timeout` exits with when it kills the script
SIMULATED_STDERR = "sandbox: simulated guest; the command did not run\n"  # a line of stderr, as a command writes it
# Guest attributes allow ~10 queries per minute per VM: 8 in the first minute with this backoff.
POLL_FIRST, POLL_FACTOR, POLL_CAP = 2.0, 1.5, 15.0

_zones: weakref.WeakKeyDictionary[GcpClients, dict[str, str]] = weakref.WeakKeyDictionary()


def zone_of(gcp: GcpClients, name: str) -> str:
    """The zone of instance `name` (ids are names), found over the region's zones and remembered per
    client (`run` keeps its neutral signature, which carries no zones)."""
    from vmplane.clouds.gcp.instances import list_instances, region_zones

    cache = _zones.setdefault(gcp, {})
    if name not in cache:
        for zone, inst in list_instances(gcp, region_zones(gcp)):
            cache[inst.name] = zone
    if name not in cache:
        raise NotFoundError(f"no instance {name} in {gcp.project}/{gcp.region}", operation="compute.instances.list")
    return cache[name]


def script_of(commands: list[str]) -> str:
    """The commands as one bash script, one per line (as SSM's RunShellScript runs them): the exit
    status is the last command's."""
    script = "\n".join(commands) + "\n"
    size = len(script.encode())
    if size > MAX_SCRIPT_BYTES:
        raise InvalidRequestError(f"script is {size} bytes, over the exec channel's {MAX_SCRIPT_BYTES}")
    return script


def post(gcp: GcpClients, zone: str, instance: str, message: dict[str, Any]) -> None:
    """Put `message` in the VM's mailbox, merged into its metadata (user-data and the rest kept), with the
    current fingerprint; a 412 (someone changed the metadata in between) is retried once."""
    from google.cloud import compute_v1 as c

    client = gcp.compute("Instances")
    value = json.dumps(message, separators=(",", ":"))
    for attempt in (1, 2):
        inst = gcp.call(
            "compute.instances.get",
            lambda: client.get(project=gcp.project, zone=zone, instance=instance, timeout=CALL_TIMEOUT),
        )
        items = [c.Items(key=i.key, value=i.value) for i in inst.metadata.items if i.key != MAILBOX_KEY]
        metadata = c.Metadata(
            fingerprint=inst.metadata.fingerprint, items=[*items, c.Items(key=MAILBOX_KEY, value=value)]
        )
        try:
            operations.run(
                gcp,
                "compute.instances.setMetadata",
                partial(
                    client.set_metadata_unary,
                    project=gcp.project,
                    zone=zone,
                    instance=instance,
                    metadata_resource=metadata,
                    timeout=CALL_TIMEOUT,
                ),
                what=f"exec mailbox on {instance}",
            )
            return
        except ConflictError:
            if attempt == 2:
                raise


def result_of(instance: str, answer: str) -> CommandResult:
    """The guest's JSON answer in neutral words. The sandbox's simulated guest says `simulated`: nothing
    ran, so stdout stays empty and stderr says so (the call succeeds, as the sandbox's run did)."""
    try:
        data = json.loads(answer)
    except ValueError:
        return CommandResult(
            instance, CommandStatus.failed, -1, "", f"unreadable answer from the guest: {answer[:200]}"
        )
    code = int(data.get("exitCode", -1))
    if data.get("simulated"):
        return CommandResult(instance, CommandStatus.success, code, "", SIMULATED_STDERR)
    status = (
        CommandStatus.success
        if code == 0
        else CommandStatus.timed_out
        if code == TIMED_OUT_EXIT
        else CommandStatus.failed
    )
    return CommandResult(instance, status, code, str(data.get("stdout", "")), str(data.get("stderr", "")))


def run(
    gcp: GcpClients, instance_ids: list[str], commands: list[str], *, comment: str, timeout: float = 120
) -> list[CommandResult]:
    """Send one script to every instance, then collect each answer until `timeout` (timed_out then).
    `comment` is not sent: the mailbox carries only what the agent runs."""
    script = base64.b64encode(script_of(commands).encode()).decode()
    sent: dict[str, tuple[str, str]] = {}  # instance -> (zone, message id)
    out: dict[str, CommandResult] = {}
    for name in instance_ids:
        try:
            zone = zone_of(gcp, name)
        except NotFoundError as err:
            out[name] = CommandResult(name, CommandStatus.undeliverable, -1, "", str(err))
            continue
        msg_id = uuid.uuid4().hex
        post(gcp, zone, name, {"id": msg_id, "script": script, "timeout": int(timeout)})
        sent[name] = (zone, msg_id)
    deadline = time.monotonic() + timeout
    delay = POLL_FIRST
    while True:
        for name, (zone, msg_id) in sent.items():
            if name in out:
                continue
            answer = guest_attributes(gcp, zone, name, f"{NAMESPACE}/{msg_id}").get(f"{NAMESPACE}/{msg_id}")
            if answer is not None:
                out[name] = result_of(name, answer)
        remaining = deadline - time.monotonic()
        if len(out) == len(instance_ids) or remaining <= 0:
            break
        time.sleep(min(delay, remaining))
        delay = min(delay * POLL_FACTOR, POLL_CAP)
    late = f"no answer from the guest within {timeout:.0f}s (is the vmplane-mailbox agent running?)"
    return [out.get(n) or CommandResult(n, CommandStatus.timed_out, -1, "", late) for n in instance_ids]


def session_hint(gcp: GcpClients, vm_id: str) -> SessionHint:
    """`gcloud compute ssh` through IAP (OS Login decides who may log in). Whether interactive sessions
    are allowed at all (`exec.gcp.interactive`) is the spec's: the caller refuses when they are off."""
    zone = zone_of(gcp, vm_id)
    argv = ["gcloud", "compute", "ssh", vm_id, "--project", gcp.project, "--zone", zone, "--tunnel-through-iap"]
    return SessionHint(argv=argv, needs="gcloud")
