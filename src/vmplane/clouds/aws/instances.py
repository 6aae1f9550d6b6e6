"""Fixed-pool instances (stable names, spread over the private subnets) and readiness: every VM
`running`, then its bootstrap sentinel seen through the exec channel."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from vmplane.bootstrap.cloudinit import SENTINEL_CHECK_COMMAND
from vmplane.clouds.aws import exec as aws_exec
from vmplane.clouds.aws import naming, targets, tokens
from vmplane.clouds.aws.errors import aws_call
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.aws.tags import job_filters, tag_spec
from vmplane.clouds.base import Context, bootstrap_timed_out
from vmplane.clouds.errors import (
    DeadlineExceededError,
    InvalidRequestError,
    NotFoundError,
    TransientError,
)
from vmplane.clouds.waits import poll, retry
from vmplane.envspec.models import FixedPool
from vmplane.state import VMRecord, VMState

T = TypeVar("T")

LIVE_STATES = ["pending", "running", "stopping", "stopped"]
STOPPED_STATES = ("stopping", "stopped")
RUNNING_TIMEOUT = 600.0
IAM_PROPAGATION_TIMEOUT = 120.0
TEARDOWN_TIMEOUT = 900.0


def ensure_fixed_pool(aws: AwsClients, ctx: Context, pool_name: str, pool: FixedPool) -> None:
    infra = ctx.infra
    held = pool_name in infra.StoppedPools
    for index in range(pool.size):
        name = naming.instance_name(ctx.spec, pool_name, index)
        rec = infra.vm(name)
        if rec is None:
            rec = VMRecord(Name=name, Pool=pool_name, Index=index)
            infra.VMs = [*infra.VMs, rec]
            ctx.save()  # intent first: a crash from here on leaves a record to reconcile
        live = _find_instance(aws, ctx, name, rec.ID)
        if live is None and held:
            ctx.log(f"pool {pool_name} is stopped (`vmplane stop`): {name} is launched when it starts")
            continue
        if live is None:
            subnet = infra.VMSubnetIDs[index % len(infra.VMSubnetIDs)]
            # The recorded instance is gone (terminated out of band): a launch token of its own, since
            # EC2 answers a reused token with the instance it first launched, terminated or not.
            suffix = f"-after-{rec.ID}" if rec.ID else ""
            live = run_instance(aws, ctx, pool_name, name, subnet, token_suffix=suffix)
        if live["InstanceId"] != rec.ID:
            rec.State = VMState.pending  # a new instance (launched now or before a crash) goes through readiness
        record_instance(rec, live)
        follow_power_state(rec, live)
        ctx.save()
    _shrink_fixed_pool(aws, ctx, pool_name, pool.size)
    stopped = [v.Name for v in infra.VMs if v.Pool == pool_name and v.State is VMState.stopped]
    if stopped:
        why = "`vmplane stop`" if held else "its schedule, or by hand"
        ctx.log(f"pool {pool_name}: {', '.join(stopped)} stopped ({why}): kept stopped, not polled")
    ctx.log(f"pool {pool_name}: {pool.size} VMs launched")


def follow_power_state(rec: VMRecord, inst: Mapping[str, Any]) -> None:
    """The record follows a stop or start that happened outside the job (the pool's schedule, a person):
    a stopped VM is recorded `stopped` (not recreated, not waited for, its sentinel not polled); one that
    runs again after a stop goes back through readiness."""
    state = inst["State"]["Name"]
    if state in STOPPED_STATES:
        rec.State = VMState.stopped
    elif rec.State is VMState.stopped:
        rec.State = VMState.pending


def _shrink_fixed_pool(aws: AwsClients, ctx: Context, pool_name: str, size: int) -> None:
    """A smaller `size` removes the highest-numbered VMs (drained from the LB first)."""
    extra = [v for v in ctx.infra.VMs if v.Pool == pool_name and v.Index >= size]
    for vm in extra:
        if vm.ID:
            targets.drain_target(aws, ctx, vm.ID)
            terminate(aws, [vm.ID])
        ctx.infra.VMs = [v for v in ctx.infra.VMs if v.Name != vm.Name]
        ctx.save()
        ctx.log(f"pool {pool_name}: removed {vm.Name} (size is {size})")


def _find_instance(aws: AwsClients, ctx: Context, name: str, known_id: str | None = None) -> Mapping[str, Any] | None:
    """The live instance named `name`; the recorded one first (during a rotation two share the name)."""
    instances = instances_named(aws, ctx, name)
    instances.sort(key=lambda i: (i["InstanceId"] != known_id, i.get("LaunchTime", "")))
    return instances[0] if instances else None


def instances_named(aws: AwsClients, ctx: Context, name: str) -> list[Mapping[str, Any]]:
    reservations = aws_call(
        aws.ec2.describe_instances,
        Filters=[*job_filters(ctx.tagger, "vm", name), {"Name": "instance-state-name", "Values": LIVE_STATES}],
    )["Reservations"]
    return [i for r in reservations for i in r["Instances"]]


def profile_not_yet_visible(err: InvalidRequestError) -> bool:
    """RunInstances refusing an instance profile that IAM created seconds ago: IAM is eventually
    consistent, so EC2 may not see it yet, and a retry succeeds. AWS reports it as InvalidParameterValue,
    which also covers parameters that are really wrong; the message names the parameter, so it narrows
    the code down (and is all there is when an endpoint sends no code)."""
    # CreateAutoScalingGroup says it as ValidationError ("You must use a valid fully-formed launch
    # template. Value (p) for parameter iamInstanceProfile.name is invalid"): github.com/eksctl-io/eksctl/issues/8039.
    if err.code not in ("InvalidParameterValue", "ValidationError", None, "Unknown"):
        return False
    return "iaminstanceprofile" in str(err.args[0]).lower().replace(" ", "")


def call_retrying_profile(fn: Callable[..., T], what: str, /, **kwargs: object) -> T:
    """One call that names an instance profile (directly or through its launch template), retried while
    EC2 does not see the profile yet (profile_not_yet_visible), to IAM_PROPAGATION_TIMEOUT."""

    def attempt() -> T:
        try:
            return aws_call(fn, **kwargs)
        except InvalidRequestError as err:
            if profile_not_yet_visible(err):
                raise TransientError(str(err), code=err.code, operation=err.operation) from err
            raise

    return retry(attempt, what=what, timeout=IAM_PROPAGATION_TIMEOUT)


def run_instance(
    aws: AwsClients, ctx: Context, pool_name: str, name: str, subnet: str, token_suffix: str = ""
) -> dict[str, Any]:
    infra = ctx.infra
    launched = call_retrying_profile(
        aws.ec2.run_instances,
        f"launch {name}",
        LaunchTemplate={
            "LaunchTemplateId": infra.LaunchTemplateID[pool_name],
            "Version": str(infra.LaunchTemplateVersion[pool_name]),
        },
        SubnetId=subnet,
        MinCount=1,
        MaxCount=1,
        # Same token on a retry after a crash: AWS returns the first instance, not a new one.
        ClientToken=tokens.run_instances_token(ctx.job_id, name, token_suffix),
        # Tagged here as well as in the template: tags must not depend on propagation.
        TagSpecifications=[
            *tag_spec("instance", ctx.tagger.tags("vm", name)),
            *tag_spec("volume", ctx.tagger.tags("volume", f"{name}-root")),
            *tag_spec("network-interface", ctx.tagger.tags("vm-eni", f"{name}-eni")),
        ],
    )
    return dict(launched["Instances"][0])


def record_instance(rec: VMRecord, inst: Mapping[str, Any]) -> None:
    rec.ID = inst["InstanceId"]
    rec.PrivateIP = inst.get("PrivateIpAddress")
    rec.AZ = inst.get("Placement", {}).get("AvailabilityZone")
    rec.SubnetID = inst.get("SubnetId")
    rec.LaunchTemplateVersion = launched_version(inst)


def launched_version(inst: Mapping[str, Any]) -> int | None:
    """The template version an instance was launched from (EC2 tags every instance launched from one)."""
    tags = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}
    version = tags.get("aws:ec2launchtemplate:version")
    return int(version) if version and version.isdigit() else None


def terminate(aws: AwsClients, ids: list[str]) -> None:
    with contextlib.suppress(NotFoundError):
        aws_call(aws.ec2.terminate_instances, InstanceIds=ids)


# ---- readiness ------------------------------------------------------------------------------------


def wait_running(aws: AwsClients, ctx: Context) -> None:
    infra = ctx.infra
    pending = {v.ID: v for v in infra.VMs if v.ID and v.State == VMState.pending}
    if not pending:
        return

    def all_running() -> bool | None:
        res = aws_call(aws.ec2.describe_instances, InstanceIds=sorted(pending))["Reservations"]
        for inst in (i for r in res for i in r["Instances"]):
            state = inst["State"]["Name"]
            if state in ("terminated", "shutting-down"):
                raise InvalidRequestError(f"instance {inst['InstanceId']} went {state} during launch")
            if state == "running" and inst["InstanceId"] in pending:
                rec = pending.pop(inst["InstanceId"])
                rec.PrivateIP = inst.get("PrivateIpAddress") or rec.PrivateIP
                rec.State = VMState.bootstrap
        return True if not pending else None

    try:
        poll(all_running, what="instances to be running", timeout=RUNNING_TIMEOUT)
    finally:
        ctx.save()


def wait_bootstrapped(aws: AwsClients, ctx: Context) -> None:
    """Poll the sentinel through the exec channel until every VM is ready, or fail at the deadline."""
    infra = ctx.infra
    timeout = ctx.spec.bootstrap.timeout_seconds
    reasons: dict[str, str] = {}  # what a failed check printed: the bootstrap's failure lines

    def all_ready() -> bool | None:
        waiting = [v for v in infra.VMs if v.ID and v.State == VMState.bootstrap]
        if not waiting:
            return True
        try:
            results = aws_exec.run(
                aws,
                [v.ID for v in waiting if v.ID],
                [SENTINEL_CHECK_COMMAND],
                comment="vmplane sentinel check",
                timeout=60,
            )
        except (TransientError, DeadlineExceededError):
            results = []  # agents still registering: try again
        by_id = {r.instance_id: r for r in results}
        for vm in waiting:
            r = by_id.get(vm.ID or "")
            if r is not None and r.ok:
                vm.State = VMState.ready
            elif r is not None and r.stdout.strip():
                reasons[vm.Name] = r.stdout.strip()[-1000:]
        ctx.save()
        return None if any(v.State == VMState.bootstrap for v in infra.VMs) else True

    try:
        # Each check is a Run Command: looser than a describe's wait, still within a quarter of the boot.
        poll(all_ready, what="the bootstrap sentinel", timeout=timeout, first=1.0, factor=1.5, cap=10, late=0.25)
    except DeadlineExceededError as err:
        raise bootstrap_timed_out(ctx, infra.VMs, timeout, reasons) from err
    ctx.log(f"{sum(v.State == VMState.ready for v in infra.VMs)} VMs ready (sentinel seen)")
