"""The IAM-gated exec channel on AWS: SSM Run Command. No SSH, no key pairs.

Note on the sandbox: moto records SendCommand but executes nothing; every invocation reports
Success with empty output. On the sandbox a sentinel check therefore proves only that vmplane sends
the right request to the right instances, not that cloud-init ran. vmplane says so in its output.
"""

from __future__ import annotations

from vmplane.clouds.aws.capabilities import EXEC_SCRIPT_BYTES
from vmplane.clouds.aws.errors import aws_call
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.base import CommandResult, CommandStatus
from vmplane.clouds.errors import NotFoundError
from vmplane.clouds.waits import poll

DOCUMENT = "AWS-RunShellScript"
# SSM's terminal invocation statuses, in the neutral words of CommandStatus.
TERMINAL = {
    "Success": CommandStatus.success,
    "Failed": CommandStatus.failed,
    "Cancelled": CommandStatus.cancelled,
    "TimedOut": CommandStatus.timed_out,
    "ExecutionTimedOut": CommandStatus.timed_out,
    "DeliveryTimedOut": CommandStatus.undeliverable,
    "Undeliverable": CommandStatus.undeliverable,
    "Terminated": CommandStatus.undeliverable,
    "InvalidPlatform": CommandStatus.undeliverable,
    "AccessDenied": CommandStatus.undeliverable,
}
# One SSM command document parameter holds at most this much script (SSM's limit is 64 KiB per
# document parameter; vmplane keeps headroom for the JSON encoding).
MAX_SCRIPT_BYTES = EXEC_SCRIPT_BYTES
BATCH = 50  # SendCommand accepts at most 50 instance ids


def send(aws: AwsClients, instance_ids: list[str], commands: list[str], *, comment: str, timeout_s: int = 60) -> str:
    """Send one shell script to instances; returns the command id."""
    # An instance whose SSM agent has not registered yet answers InvalidInstanceId: still booting, so
    # translate makes it a TransientError and callers wait and send again.
    return str(
        aws_call(
            aws.ssm.send_command,
            InstanceIds=instance_ids,
            DocumentName=DOCUMENT,
            Comment=comment[:100],
            TimeoutSeconds=max(30, timeout_s),
            Parameters={"commands": commands, "executionTimeout": [str(timeout_s)]},
        )["Command"]["CommandId"]
    )


def results(aws: AwsClients, command_id: str, instance_ids: list[str], *, timeout: float) -> list[CommandResult]:
    """Wait for every invocation of a command to finish; return their results."""
    out: dict[str, CommandResult] = {}

    def done() -> list[CommandResult] | None:
        for iid in instance_ids:
            if iid in out:
                continue
            try:
                inv = aws_call(aws.ssm.get_command_invocation, CommandId=command_id, InstanceId=iid)
            except NotFoundError:  # InvocationDoesNotExist: not yet visible (eventual consistency)
                continue
            if inv["Status"] in TERMINAL:
                out[iid] = CommandResult(
                    instance_id=iid,
                    status=TERMINAL[inv["Status"]],
                    exit_code=int(inv.get("ResponseCode", -1)),
                    stdout=inv.get("StandardOutputContent", ""),
                    stderr=inv.get("StandardErrorContent", ""),
                )
        return [out[i] for i in instance_ids] if len(out) == len(instance_ids) else None

    return poll(done, what=f"command {command_id}", timeout=timeout, first=0.05, cap=3)


def run(
    aws: AwsClients, instance_ids: list[str], commands: list[str], *, comment: str, timeout: float = 120
) -> list[CommandResult]:
    collected: list[CommandResult] = []
    for i in range(0, len(instance_ids), BATCH):
        batch = instance_ids[i : i + BATCH]
        cid = send(aws, batch, commands, comment=comment, timeout_s=int(timeout))
        collected.extend(results(aws, cid, batch, timeout=timeout))
    return collected
