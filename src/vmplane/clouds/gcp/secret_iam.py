"""The VMs' read access to exactly the referenced secrets: one `roles/secretmanager.secretAccessor`
binding for the environment's service account on each secret itself (its IAM policy, never the
project's), so the account reads those secrets and no other.

The secrets are the user's: vmplane edits only its own member in their policies (read-modify-write with
the etag, as for the project policy) and never changes or deletes a secret. `GcpInfra.SecretBindings`
records every secret vmplane may have bound, written before the grants (intent) and narrowed to the
spec's after the bindings of references that went are removed, so a run killed between two
setIamPolicy calls converges on the re-run, and teardown knows every secret to clean.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from vmplane.clouds.base import Context, Leftover
from vmplane.clouds.errors import AuthError, InvalidRequestError, NotFoundError
from vmplane.clouds.gcp import naming
from vmplane.clouds.gcp.discovery import Secrets
from vmplane.clouds.gcp.identity import _settling, add_member, members, modify_policy, remove_members
from vmplane.clouds.gcp.ids import gcp_ids
from vmplane.clouds.gcp.secrets import ACCESSOR, SET_PERMISSION, referenced_secrets, secret_parts
from vmplane.clouds.gcp.session import GcpClients
from vmplane.envspec.models import EnvSpec

LEFTOVER_KIND = "secret-iam-member"


def wanted_secrets(gcp: GcpClients, spec: EnvSpec) -> dict[str, str]:
    """Each referenced secret's resource name -> the first field that references it."""
    return referenced_secrets(gcp.project, spec)


def _secrets(gcp: GcpClients) -> Secrets:
    return gcp.secretmanager.projects().secrets()


def read_policy(gcp: GcpClients, secret: str) -> dict[str, Any]:
    api = _secrets(gcp)
    req = partial(api.getIamPolicy, resource=secret, options_requestedPolicyVersion=3)
    out: dict[str, Any] = gcp.call("secretmanager.projects.secrets.getIamPolicy", lambda: req().execute())
    return out


def _write_policy(gcp: GcpClients, secret: str, policy: dict[str, Any]) -> Any:
    api = _secrets(gcp)
    req = partial(api.setIamPolicy, resource=secret, body={"policy": policy})
    return gcp.call("secretmanager.projects.secrets.setIamPolicy", lambda: req().execute())


def _modify(gcp: GcpClients, secret: str, change: Any) -> bool:
    return modify_policy(
        partial(read_policy, gcp, secret), partial(_write_policy, gcp, secret), change, f"secret {secret}"
    )


def bind(gcp: GcpClients, secret: str, email: str, field: str) -> bool:
    """Our account in the secret's accessor binding; True if the policy was written."""
    member = members(email)[0]
    project, name = secret_parts(secret)
    try:
        return _modify(gcp, secret, lambda policy: add_member(policy, member, (ACCESSOR,)))
    except NotFoundError as e:  # deleted since stepValidate checked it
        raise InvalidRequestError(f"{field}: gcp-sm:{name}: no such secret in project {project}") from e
    except AuthError as e:
        raise AuthError(
            f"{field}: granting {email} {ACCESSOR} on {secret} needs {SET_PERMISSION} there "
            f"(roles/secretmanager.admin): {e}",
            code=e.code,
            operation=e.operation,
        ) from e


def unbind(gcp: GcpClients, secret: str, email: str) -> bool:
    """Our account out of the secret's accessor binding (live or deleted form); a secret gone is done."""
    try:
        return _modify(gcp, secret, lambda policy: remove_members(policy, email, ACCESSOR))
    except NotFoundError:
        return False


def ensure_secret_bindings(gcp: GcpClients, ctx: Context, email: str) -> None:
    ids = gcp_ids(ctx.infra)
    wanted = wanted_secrets(gcp, ctx.spec)
    gone = sorted(set(ids.SecretBindings) - set(wanted))
    ids.SecretBindings = sorted(set(ids.SecretBindings) | set(wanted))
    ctx.save()  # intent: a crash from here on leaves every secret we may bind on the record
    for secret, field in wanted.items():
        # A just-created account may be unknown to IAM for a while (400 "does not exist"); a 404 is the secret.
        _settling(partial(bind, gcp, secret, email, field), f"grant {ACCESSOR} on {secret} to {email}", not_found=False)
    for secret in gone:
        unbind(gcp, secret, email)
    ids.SecretBindings = list(wanted)
    ctx.save()
    if wanted or gone:
        what = ", ".join(secret_parts(s)[1] for s in wanted) or "none"
        ctx.log(f"service account {email}: {ACCESSOR} on secrets {what}" + (f" ({len(gone)} removed)" if gone else ""))


def delete_secret_bindings(gcp: GcpClients, ctx: Context, email: str) -> None:
    """Every binding vmplane added, removed; the secrets themselves are left as they are."""
    ids = gcp_ids(ctx.infra)
    for secret in sorted(set(ids.SecretBindings) | set(wanted_secrets(gcp, ctx.spec))):
        unbind(gcp, secret, email)
    if ids.SecretBindings:
        ctx.log(f"removed {email} from {len(ids.SecretBindings)} secret(s)' {ACCESSOR} binding")
    ids.SecretBindings = []
    ctx.save()


def leftovers(gcp: GcpClients, ctx: Context) -> list[Leftover]:
    """A binding for our account still on a secret the job referenced or recorded."""
    ids = gcp_ids(ctx.infra)
    email = ids.ServiceAccountEmail or naming.service_account_email(ctx.spec, gcp.project)
    member, deleted_prefix = members(email)
    out = []
    for secret in sorted(set(ids.SecretBindings) | set(wanted_secrets(gcp, ctx.spec))):
        try:
            policy = read_policy(gcp, secret)
        except NotFoundError:
            continue
        for b in policy.get("bindings", []):
            if any(m == member or m.startswith(deleted_prefix) for m in b.get("members", [])):
                out.append(Leftover(LEFTOVER_KIND, f"{secret}:{b.get('role')}:{member}"))
    return out
