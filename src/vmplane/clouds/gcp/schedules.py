"""Pool schedules on Google's own schedulers, so they keep working while vmplane is down.

Fixed pools follow an instance schedule resource policy (regional; `instances.addResourcePolicies`).
Google cannot modify a policy that VMs follow, so a changed schedule is a new policy under a new name
(the schedule's digest in it: schedule_policy.py): created, then each VM is moved from the old policy to
the new one (a VM follows one instance schedule at most: detach, then attach), then the old one goes.
Everything is found in the cloud by name prefix and ownership, so a run killed half-way converges.
Auto-scaled pools keep theirs in the autoscaler (mig.py), brought in line here too.

Google runs instance schedules as the project's Compute Engine Service Agent, which must hold
compute.instances.start and .stop (Google's own samples add a custom role for it: its default
roles/compute.serviceAgent does not). vmplane's identity step manages only the environment's own service
account, never project-wide grants to Google's agents, so stepValidate checks the agent's roles and
refuses, saying how to grant them, rather than granting them itself.

The sandbox stores the policies and attachments and checks what Google refuses, but fires no schedule.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Any

from vmplane.clouds.base import Context
from vmplane.clouds.deletes import TEARDOWN_TIMEOUT
from vmplane.clouds.errors import CloudError, InvalidRequestError
from vmplane.clouds.gcp import mig, naming, ownership, schedule_policy
from vmplane.clouds.gcp.ids import gcp_ids
from vmplane.clouds.gcp.instances import owned_instances, record_of, region_zones
from vmplane.clouds.gcp.operations import create, last_segment, remove, run
from vmplane.clouds.gcp.session import CALL_TIMEOUT, GcpClients
from vmplane.envspec.models import AsgPool, FixedPool

# Outside teardown a policy still in use (someone attached it to another VM) is reported after this
# long, not waited on for the teardown deadline.
POLICY_DELETE_TIMEOUT = 120.0


def policy_url(gcp: GcpClients, name: str) -> str:
    return f"projects/{gcp.project}/regions/{gcp.region}/resourcePolicies/{name}"


def job_policies(gcp: GcpClients, ctx: Context) -> dict[str, Any]:
    """The job's resource policies in the region (by the env's name prefix, then ownership)."""
    client = gcp.compute("ResourcePolicies")
    request = {
        "project": gcp.project,
        "region": gcp.region,
        "filter": f"name eq {re.escape(naming.prefix(ctx.spec))}.*",
    }
    listed = gcp.call("compute.resourcePolicies.list", lambda: list(client.list(request=request, timeout=CALL_TIMEOUT)))
    return {p.name: p for p in listed if ownership.owned_by(p, ctx.tagger)}


def ensure_schedules(gcp: GcpClients, ctx: Context) -> None:
    spec, infra, ids = ctx.spec, ctx.infra, gcp_ids(ctx.infra)
    want = schedule_policy.wanted_policies(spec, infra)
    if want or ids.SchedulePolicies:  # the record is a superset of what may exist: nothing to do else
        _converge_policies(gcp, ctx, want)
    for pool_name, pool in spec.pools.items():
        if isinstance(pool, AsgPool) and pool.schedule is not None:
            mig.sync_autoscaler(gcp, ctx, pool_name, pool)  # the VM step keeps it too; this is the contract
    if want:
        ctx.log(f"instance schedules: {', '.join(f'{p} -> {n}' for p, n in sorted(want.items()))}")
    if gcp.target.sandbox and any(p.schedule is not None for p in spec.pools.values()):
        ctx.log("sandbox: the schedules are stored and checked, but the sandbox never fires them")


def _converge_policies(gcp: GcpClients, ctx: Context, want: dict[str, str]) -> None:
    infra, ids = ctx.infra, gcp_ids(ctx.infra)
    ids.SchedulePolicies = {**ids.SchedulePolicies, **want}
    ctx.save()  # intent: the names are on record before they exist
    have = job_policies(gcp, ctx)
    for pool_name, name in sorted(want.items()):
        if name not in have:
            _create_policy(gcp, ctx, pool_name, name)
    ours = set(have) | set(want.values())
    if ours:
        for zone, inst in owned_instances(gcp, ctx, sorted(set(infra.Zones))):
            rec = record_of(infra, inst.name)
            fixed_pool = rec.Pool if rec is not None and rec.Index >= 0 else None
            _follow(gcp, zone, inst, want.get(fixed_pool) if fixed_pool else None, ours)
    for name in sorted(set(have) - set(want.values())):
        _delete_policy(gcp, name, timeout=POLICY_DELETE_TIMEOUT)
    ids.SchedulePolicies = want
    ctx.save()


def delete_schedules(gcp: GcpClients, ctx: Context) -> None:
    """Teardown, before the VMs go: every instance schedule of the job detached and deleted (found in the
    cloud, so a crash's leftovers go too). MIG scaling schedules go with their autoscalers, which are the
    first thing the VM teardown deletes."""
    ids = gcp_ids(ctx.infra)
    have = job_policies(gcp, ctx)
    if have:
        zones = sorted(set(ctx.infra.Zones) | set(region_zones(gcp)))
        for zone, inst in owned_instances(gcp, ctx, zones):
            _follow(gcp, zone, inst, None, set(have))
        for name in sorted(have):
            _delete_policy(gcp, name)
    ids.SchedulePolicies = {}
    ctx.save()
    ctx.log(f"deleted {len(have)} instance schedules")


def _create_policy(gcp: GcpClients, ctx: Context, pool_name: str, name: str) -> None:
    from google.cloud import compute_v1 as c

    pool = ctx.spec.pools[pool_name]
    assert isinstance(pool, FixedPool) and pool.schedule is not None
    resource = schedule_policy.policy_resource(ctx.tagger, name, pool.schedule)
    client = gcp.compute("ResourcePolicies")
    create(
        gcp,
        "compute.resourcePolicies.insert",
        lambda rid: client.insert_unary(
            request=c.InsertResourcePolicyRequest(
                project=gcp.project, region=gcp.region, resource_policy_resource=resource, request_id=rid
            ),
            timeout=CALL_TIMEOUT,
        ),
        what=f"instance schedule {name}",
    )


def _follow(gcp: GcpClients, zone: str, inst: Any, target: str | None, ours: set[str]) -> None:
    """The instance follows `target` (or none of our policies): stale ones detached first, since a VM
    follows at most one instance schedule. Others' policies on it are left alone."""
    attached = [u for u in inst.resource_policies if last_segment(u) in ours]
    stale = [u for u in attached if last_segment(u) != target]
    if stale:
        _policies(gcp, zone, inst.name, "remove", stale)
    if target is not None and all(last_segment(u) != target for u in attached):
        _policies(gcp, zone, inst.name, "add", [policy_url(gcp, target)])


def _policies(gcp: GcpClients, zone: str, instance: str, verb: str, urls: list[str]) -> None:
    """instances.addResourcePolicies / removeResourcePolicies (`verb` "add" | "remove")."""
    from google.cloud import compute_v1 as c

    client = gcp.compute("Instances")
    send: Callable[[], Any]
    # Spelled out per verb (not one call with a built keyword): mypy checks each request's own names.
    if verb == "add":
        add = c.InstancesAddResourcePoliciesRequest(resource_policies=urls)
        send = partial(
            client.add_resource_policies_unary,
            project=gcp.project,
            zone=zone,
            instance=instance,
            instances_add_resource_policies_request_resource=add,
            timeout=CALL_TIMEOUT,
        )
    else:
        rm = c.InstancesRemoveResourcePoliciesRequest(resource_policies=urls)
        send = partial(
            client.remove_resource_policies_unary,
            project=gcp.project,
            zone=zone,
            instance=instance,
            instances_remove_resource_policies_request_resource=rm,
            timeout=CALL_TIMEOUT,
        )
    run(
        gcp,
        f"compute.instances.{verb}ResourcePolicies",
        send,
        what=f"{verb} {', '.join(last_segment(u) for u in urls)} on {instance}",
    )


def _delete_policy(gcp: GcpClients, name: str, timeout: float = TEARDOWN_TIMEOUT) -> None:
    client = gcp.compute("ResourcePolicies")
    remove(
        gcp,
        "compute.resourcePolicies.delete",
        lambda: client.delete_unary(project=gcp.project, region=gcp.region, resource_policy=name, timeout=CALL_TIMEOUT),
        what=f"delete instance schedule {name}",
        timeout=timeout,
    )


# ---- stepValidate: may Google's agent start and stop the VMs? -------------------------------------

NEEDED = frozenset({"compute.instances.start", "compute.instances.stop"})
# Predefined roles that hold both (Compute Instance Admin is the one Google's guide names).
GRANTING = frozenset(
    {
        "roles/owner",
        "roles/editor",
        "roles/compute.admin",
        "roles/compute.instanceAdmin",
        "roles/compute.instanceAdmin.v1",
    }
)
# The agent's default role: Google's instance-schedule samples grant start/stop beside it.
LACKING = frozenset({"roles/compute.serviceAgent"})


def service_agent(project_number: str) -> str:
    return f"service-{project_number}@compute-system.iam.gserviceaccount.com"


def agent_verdict(
    policy: dict[str, Any], agent: str, permissions_of: Callable[[str], frozenset[str] | None]
) -> tuple[str, list[str]]:
    """("ok" | "missing" | "unknown", the agent's roles) from the project policy. `permissions_of(role)`
    asks IAM for a role outside the known lists (None when it cannot be read: then "unknown")."""
    member = f"serviceAccount:{agent}"
    roles = sorted(
        {b["role"] for b in policy.get("bindings", []) if member in b.get("members", []) and not b.get("condition")}
    )
    if GRANTING & set(roles):
        return "ok", roles
    granted: set[str] = set()
    unknown = False
    for role in (r for r in roles if r not in LACKING):
        found = permissions_of(role)
        unknown = unknown or found is None
        granted |= found or set()
    if granted >= NEEDED:
        return "ok", roles
    return ("unknown" if unknown else "missing"), roles


def check_service_agent(gcp: GcpClients, ctx: Context, project_number: str) -> None:
    pools = [n for n, p in ctx.spec.pools.items() if isinstance(p, FixedPool) and p.schedule is not None]
    if not pools:
        return
    projects = gcp.crm.projects()
    policy: dict[str, Any] = gcp.call(
        "cloudresourcemanager.projects.getIamPolicy",
        lambda: projects.getIamPolicy(resource=gcp.project, body={"options": {"requestedPolicyVersion": 3}}).execute(),
    )
    agent = service_agent(project_number)
    verdict, roles = agent_verdict(policy, agent, lambda role: _role_permissions(gcp, role))
    if verdict == "unknown":
        ctx.log(f"could not read every role of {agent} ({', '.join(roles)}): Google checks start/stop when it attaches")
    if verdict != "missing":
        return
    fields = ", ".join(f"pools.{p}.schedule" for p in pools)
    raise InvalidRequestError(
        f"{fields}: Google starts and stops the pool's VMs on schedule as the Compute Engine Service Agent "
        f"{agent}, which lacks compute.instances.start/stop in project {gcp.project} (its roles: "
        f"{', '.join(roles) or 'none'}). vmplane does not grant project-wide roles to Google's agents; grant them "
        f"once: gcloud projects add-iam-policy-binding {gcp.project} --member=serviceAccount:{agent} "
        "--role=roles/compute.instanceAdmin.v1 (or a custom role with just those two permissions)"
    )


def _role_permissions(gcp: GcpClients, role: str) -> frozenset[str] | None:
    iam = gcp.iam
    if role.startswith("projects/"):
        request = iam.projects().roles().get(name=role)
    elif role.startswith("organizations/"):
        request = iam.organizations().roles().get(name=role)
    else:
        request = iam.roles().get(name=role)
    try:
        got: dict[str, Any] = gcp.call("iam.roles.get", request.execute)
    except CloudError:
        return None
    return frozenset(got.get("includedPermissions", []))
