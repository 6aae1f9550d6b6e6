"""The environment's service account and its project roles: log and metric writing, nothing else (the
exec channel is the metadata mailbox, which needs no role on the VM's side).

Roles are granted by a read-modify-write of the project's IAM policy (getIamPolicy, add our member to
exactly our roles, setIamPolicy with the etag read): others' bindings are never dropped, and a
concurrent writer's change makes Resource Manager refuse ours (409/412 on the etag), so we re-read and
retry. IAM is eventually consistent: a just-created account can be unknown to getIamPolicy/setIamPolicy
(400 "does not exist") or 404 on get for a few seconds, so those are retried to IAM_SETTLE seconds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from vmplane.clouds import deletes
from vmplane.clouds.base import Context, Tagger
from vmplane.clouds.errors import ConflictError, DeadlineExceededError, InvalidRequestError, NotFoundError
from vmplane.clouds.gcp import naming, ownership
from vmplane.clouds.gcp.discovery import CrmProjects
from vmplane.clouds.gcp.ids import gcp_ids
from vmplane.clouds.gcp.session import GcpClients

ROLES = ("roles/logging.logWriter", "roles/monitoring.metricWriter")
IAM_SETTLE = 120.0  # seconds a new service account may take to be visible everywhere in IAM
POLICY_ATTEMPTS = 8  # etag conflicts in a row before giving up
SA_DESCRIPTION_MAX = 256  # IAM's limit; the full tag set as JSON may not fit

T = TypeVar("T")


def sa_description(tagger: Tagger) -> str:
    """The tag set as JSON, as elsewhere; if it exceeds IAM's 256 characters, vmplane's own keys only
    (what `owned_by` reads), so ownership is always recorded."""
    full = ownership.description(tagger, "service-account")
    if len(full) <= SA_DESCRIPTION_MAX:
        return full
    own = {k: v for k, v in tagger.tags("service-account").items() if k.startswith(tagger.prefix)}
    return json.dumps(own, sort_keys=True, separators=(",", ":"))[:SA_DESCRIPTION_MAX]


def sa_resource(project: str, email: str) -> str:
    return f"projects/{project}/serviceAccounts/{email}"


def members(email: str) -> tuple[str, str]:
    """The member our account is in a policy, and the prefix of its form once the account is deleted."""
    return f"serviceAccount:{email}", f"deleted:serviceAccount:{email}?uid="


def get_account(gcp: GcpClients, email: str) -> dict[str, Any] | None:
    sas = gcp.iam.projects().serviceAccounts()
    try:
        out: dict[str, Any] = gcp.call(
            "iam.projects.serviceAccounts.get", lambda: sas.get(name=sa_resource(gcp.project, email)).execute()
        )
    except NotFoundError:
        return None
    return out


def _settling(
    fn: Callable[[], T], what: str, *, sleep: Callable[[float], None] = time.sleep, not_found: bool = True
) -> T:
    """Retry `fn` while IAM does not know the new account yet (404 or 400 'does not exist'; a 404 only
    if `not_found`: where it means the policy's resource is gone, it is the caller's answer)."""
    deadline, delay = time.monotonic() + IAM_SETTLE, 0.5
    while True:
        try:
            return fn()
        except (NotFoundError, InvalidRequestError) as e:
            if isinstance(e, InvalidRequestError) and "not exist" not in str(e):
                raise
            if isinstance(e, NotFoundError) and not not_found:
                raise
            if time.monotonic() + delay > deadline:
                raise DeadlineExceededError(f"{what}: IAM did not see the service account in {IAM_SETTLE:.0f}s") from e
            sleep(delay)
            delay = min(delay * 2, 8.0)


def ensure_identity(gcp: GcpClients, ctx: Context) -> None:
    spec, ids = ctx.spec, gcp_ids(ctx.infra)
    account_id = naming.service_account_id(spec)
    email = naming.service_account_email(spec, gcp.project)
    ids.ServiceAccountEmail = email
    ctx.save()  # intent: teardown removes the bindings and the account by this email
    sa = get_account(gcp, email)
    if sa is None:
        body = {
            "accountId": account_id,
            "serviceAccount": {
                "displayName": f"vmplane {spec.org}/{spec.name} VMs"[:100],
                "description": sa_description(ctx.tagger),
            },
        }
        sas = gcp.iam.projects().serviceAccounts()
        try:
            gcp.call(
                "iam.projects.serviceAccounts.create",
                lambda: sas.create(name=f"projects/{gcp.project}", body=body).execute(),
            )
        except ConflictError:
            # Made by a run that crashed before its checkpoint (or a racing one): it must be ours.
            sa = _settling(lambda: _must_get(gcp, email), f"service account {email}")
    if sa is not None and not ownership.owned_by(sa, ctx.tagger):
        raise ConflictError(
            f"service account {email} already exists and belongs to {ownership.owner_of(sa, ctx.tagger)}; "
            "destroy that environment or change `org`/`name`",
            code="alreadyExists",
        )
    _settling(lambda: grant(gcp, email), f"grant roles to {email}")
    ids.ServiceAccountRoles = list(ROLES)
    ctx.save()
    ctx.log(f"service account {email}: {', '.join(ROLES)}")
    from vmplane.clouds.gcp import secret_iam  # it builds on this module's policy helpers

    secret_iam.ensure_secret_bindings(gcp, ctx, email)


def _must_get(gcp: GcpClients, email: str) -> dict[str, Any]:
    sa = get_account(gcp, email)
    if sa is None:
        raise NotFoundError(f"service account {email} not visible yet")
    return sa


def modify_policy(
    read: Callable[[], dict[str, Any]],
    write: Callable[[dict[str, Any]], Any],
    change: Callable[[dict[str, Any]], bool],
    what: str,
) -> bool:
    """Read-modify-write of one IAM policy (`read` it, `change` edits it in place and says whether it
    did, `write` it with the etag read). Retries on an etag conflict; True if a new policy was written."""
    for _ in range(POLICY_ATTEMPTS):
        policy = read()
        if not change(policy):
            return False
        try:
            write(policy)
            return True
        except ConflictError:
            continue  # someone wrote the policy between our read and write: read it again
    raise ConflictError(f"{what} IAM policy kept changing under us ({POLICY_ATTEMPTS} tries)")


def _modify_policy(gcp: GcpClients, change: Callable[[dict[str, Any]], bool]) -> bool:
    """The project policy's read-modify-write."""
    projects = gcp.crm.projects()

    def read() -> dict[str, Any]:
        out: dict[str, Any] = gcp.call(
            "cloudresourcemanager.projects.getIamPolicy",
            lambda: projects.getIamPolicy(
                resource=gcp.project, body={"options": {"requestedPolicyVersion": 3}}
            ).execute(),
        )
        return out

    def write(policy: dict[str, Any]) -> Any:
        return gcp.call(
            "cloudresourcemanager.projects.setIamPolicy", partial(_set_policy, projects, gcp.project, policy)
        )

    return modify_policy(read, write, change, f"project {gcp.project}")


def _set_policy(projects: CrmProjects, project: str, policy: dict[str, Any]) -> Any:
    return projects.setIamPolicy(resource=project, body={"policy": policy}).execute()


def add_member(policy: dict[str, Any], member: str, roles: tuple[str, ...] = ROLES) -> bool:
    """Add `member` to each unconditional binding of `roles` (creating it); True if anything changed."""
    bindings: list[dict[str, Any]] = policy.setdefault("bindings", [])
    changed = False
    for role in roles:
        binding = next((b for b in bindings if b.get("role") == role and not b.get("condition")), None)
        if binding is None:
            bindings.append({"role": role, "members": [member]})
            changed = True
        elif member not in binding.setdefault("members", []):
            binding["members"].append(member)
            changed = True
    return changed


def remove_members(policy: dict[str, Any], email: str, role: str | None = None) -> bool:
    """Drop our account (live or deleted form) from every binding (of `role` only, if given); empty
    bindings go. True if changed."""
    member, deleted_prefix = members(email)
    changed, kept = False, []
    for b in policy.get("bindings", []):
        if role is not None and b.get("role") != role:
            kept.append(b)
            continue
        before = list(b.get("members", []))
        after = [m for m in before if m != member and not m.startswith(deleted_prefix)]
        changed = changed or after != before
        if after:
            kept.append({**b, "members": after})
    policy["bindings"] = kept
    return changed


def grant(gcp: GcpClients, email: str) -> bool:
    member = members(email)[0]
    return _modify_policy(gcp, lambda policy: add_member(policy, member))


# ---- teardown -------------------------------------------------------------------------------------


def delete_identity(gcp: GcpClients, ctx: Context) -> None:
    ids = gcp_ids(ctx.infra)
    email = ids.ServiceAccountEmail or naming.service_account_email(ctx.spec, gcp.project)
    sa = get_account(gcp, email)
    if sa is not None and not ownership.owned_by(sa, ctx.tagger):
        ctx.log(f"leaving service account {email}: it belongs to {ownership.owner_of(sa, ctx.tagger)}")
    else:
        # Bindings first: once the account is gone its member turns into `deleted:...?uid=` and lingers.
        from vmplane.clouds.gcp import secret_iam  # it builds on this module's policy helpers

        secret_iam.delete_secret_bindings(gcp, ctx, email)
        _modify_policy(gcp, lambda policy: remove_members(policy, email))
        if sa is not None:
            sas = gcp.iam.projects().serviceAccounts()
            deletes.delete(
                lambda: gcp.call(
                    "iam.projects.serviceAccounts.delete",
                    lambda: sas.delete(name=sa_resource(gcp.project, email)).execute(),
                ),
                what=f"delete service account {email}",
            )
    ids.ServiceAccountEmail, ids.ServiceAccountRoles = None, []
    ctx.save()
    ctx.log(f"deleted service account {email}")
