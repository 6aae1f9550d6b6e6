"""IAM v1 service accounts and Resource Manager v1 project IAM policies.

setIamPolicy checks the etag (a stale one is 409 ABORTED, as Google answers a concurrent change) and
that every `serviceAccount:` member exists; deleting an account leaves `deleted:serviceAccount:...?uid=`
members behind, as Google does.
"""

from __future__ import annotations

import base64
import copy
import re
import secrets
from collections.abc import Callable

from vmplane.sandbox.gcp.compute import Call, handler
from vmplane.sandbox.gcp.errors import ApiError, invalid
from vmplane.sandbox.gcp.schema import require_body
from vmplane.sandbox.gcp.seed import compute_agent
from vmplane.sandbox.gcp.store import Project, Resource, State

ACCOUNT_ID = re.compile(r"[a-z](?:[-a-z0-9]{4,28}[a-z0-9])")
_MEMBER = re.compile(
    r"(?:user|serviceAccount|group|domain|deleted:serviceAccount|deleted:user|deleted:group):.+|allUsers|allAuthenticatedUsers"
)


def _project_of(state: State, name: str) -> Project:
    return state.project(name.split("/")[1])


def _find(state: State, name: str) -> Resource:
    """projects/P/serviceAccounts/{email or uniqueId}; P may be `-` (any project)."""
    project_id, _, ident = name.split("/")[1:4]
    for project in state.projects.values() if project_id == "-" else [state.project(project_id)]:
        for account in project.service_accounts.values():
            if ident in (account["email"], account["uniqueId"]):
                return account
    raise ApiError(404, "notFound", f"Unknown service account: {name}", "NOT_FOUND")


def _etag() -> str:
    return base64.b64encode(secrets.token_bytes(6)).decode()


@handler("iam.projects.serviceAccounts.create")
def _create(call: Call) -> Resource:
    project = _project_of(call.state, call.params["name"])
    body = require_body(call.body, "createServiceAccountRequest")
    account_id = body.get("accountId", "")
    if not ACCOUNT_ID.fullmatch(account_id):
        raise invalid(
            f"Invalid value for field 'account_id': '{account_id}'. Must match [a-z](?:[-a-z0-9]{{4,28}}[a-z0-9])"
        )
    email = f"{account_id}@{project.id}.iam.gserviceaccount.com"
    if email in project.service_accounts:
        raise ApiError(
            409, "alreadyExists", f"Service account {account_id} already exists within project projects/{project.id}."
        )
    given = body.get("serviceAccount") or {}
    account: Resource = {
        "name": f"projects/{project.id}/serviceAccounts/{email}",
        "projectId": project.id,
        "uniqueId": str(10**20 + int(call.state.new_id()))[:21],
        "email": email,
        "displayName": given.get("displayName", ""),
        "description": given.get("description", ""),
        "etag": "MDEwMjE5MjA=",
        "oauth2ClientId": "",
    }
    account["oauth2ClientId"] = account["uniqueId"]
    project.service_accounts[email] = account
    return account


@handler("iam.projects.serviceAccounts.get")
def _get(call: Call) -> Resource:
    return _find(call.state, call.params["name"])


@handler("iam.projects.serviceAccounts.patch")
def _patch(call: Call) -> Resource:
    """displayName and description only, as `updateMask` names them (Google's two mutable fields)."""
    account = _find(call.state, call.params["name"])
    body = call.body if isinstance(call.body, dict) else {}
    mask = [f.strip() for f in str(body.get("updateMask", "")).split(",") if f.strip()]
    given = body.get("serviceAccount") or {}
    for field in mask:
        if field not in ("displayName", "description"):
            from vmplane.sandbox.gcp.errors import invalid

            raise invalid(f"Invalid update mask field '{field}': only displayName and description can change.")
        account[field] = given.get(field, "")
    account["etag"] = _etag()
    return account


@handler("iam.projects.serviceAccounts.list")
def _list(call: Call) -> Resource:
    return {"accounts": list(_project_of(call.state, call.params["name"]).service_accounts.values())}


@handler("iam.projects.serviceAccounts.delete")
def _delete(call: Call) -> Resource:
    account = _find(call.state, call.params["name"])
    owner = call.state.project(account["projectId"])
    del owner.service_accounts[account["email"]]
    gone, ghost = (
        f"serviceAccount:{account['email']}",
        f"deleted:serviceAccount:{account['email']}?uid={account['uniqueId']}",
    )
    for project in call.state.projects.values():  # the project's policy and each secret's (Secret Manager)
        for policy in [project.policy, *(s["_policy"] for s in project.secrets.values())]:
            for binding in policy.get("bindings", []):
                binding["members"] = [ghost if m == gone else m for m in binding["members"]]
    return {}


@handler("cloudresourcemanager.projects.get")
def _project(call: Call) -> Resource:
    project = call.state.project(call.params["projectId"])
    return {
        "projectNumber": project.number,
        "projectId": project.id,
        "lifecycleState": "ACTIVE",
        "name": project.id,
        "createTime": "2026-01-01T00:00:00.000Z",
    }


@handler("cloudresourcemanager.projects.getIamPolicy")
def _get_policy(call: Call) -> Resource:
    return copy.deepcopy(call.state.project(call.params["resource"]).policy)


@handler("cloudresourcemanager.projects.setIamPolicy")
def _set_policy(call: Call) -> Resource:
    project = call.state.project(call.params["resource"])
    project.policy = checked_policy(call.state, call.body, project.policy["etag"], _project_role)
    return copy.deepcopy(project.policy)


def _project_role(role: str) -> bool:
    return role.startswith(("roles/", "projects/", "organizations/"))


def checked_policy(state: State, body: object, current_etag: str, role_ok: Callable[[str], bool]) -> Resource:
    """A setIamPolicy request's policy, checked as Google checks it (the etag, each role for the resource
    and each member), as it is stored: a fresh etag. Projects and secrets (secretmanager.py) share it."""
    policy = require_body(body, "setIamPolicyRequest").get("policy")
    if not isinstance(policy, dict):
        raise invalid("Invalid value for field 'policy': a policy is required.")
    if policy.get("etag") and policy["etag"] != current_etag:
        raise ApiError(
            409,
            "aborted",
            "There were concurrent policy changes. Please retry the whole read-modify-write with exponential backoff.",
            "ABORTED",
        )
    accounts = {e for p in state.projects.values() for e in p.service_accounts}
    accounts |= {compute_agent(p.number) for p in state.projects.values()}  # Google's own agents
    for i, binding in enumerate(policy.get("bindings", [])):
        if not role_ok(str(binding.get("role", ""))):
            raise invalid(f"Role {binding.get('role')} is not supported for this resource.")
        for member in binding.get("members", []):
            if not _MEMBER.fullmatch(member):
                raise invalid(f"Invalid value for field 'policy.bindings[{i}].members': '{member}'.")
            email = member.removeprefix("serviceAccount:")
            if (
                member.startswith("serviceAccount:")
                and email.endswith(".iam.gserviceaccount.com")
                and email not in accounts
            ):
                raise invalid(f"Service account {email} does not exist.")
    stored = {
        "version": policy.get("version", 1),
        "etag": _etag(),
        "bindings": copy.deepcopy(policy.get("bindings", [])),
    }
    if "auditConfigs" in policy:
        stored["auditConfigs"] = copy.deepcopy(policy["auditConfigs"])
    return stored
