"""Secret Manager v1 (global secrets, `projects.secrets.*`): secrets, their labels and IAM policies.

Versions and payloads are secretmanager_versions.py. A secret is stored in its project (`Project.secrets`,
by secret id) as Google shows it, its versions (`_versions`, oldest first: version N is index N-1) and
its IAM policy (`_policy`) under `_` keys that never leave the server. Names carry the project *number*
(`projects/123/secrets/s`), as Google's answers do; a request may name the project by id or number.

Who calls: the sandbox issues no tokens and checks none (the driver talks to it with anonymous
credentials), so every caller is the project's owner, except a bearer token `sandbox-sa:EMAIL`: the
sandbox's stand-in for the token a VM's metadata server would hand out for service account EMAIL. That
caller may read a payload only with an accessor binding on the secret or its project (403 otherwise, as
Google); binding conditions are not evaluated. Each payload access is recorded with its caller
(`GET /_sandbox/secret-accesses`); another token is recorded by a digest, never in clear.

Not emulated (refused 501, so nothing pretends to work): regional secrets (`projects.locations.*`),
rotation, topics, TTL/expiry, customer-managed encryption, tags, managed rotation.
"""

from __future__ import annotations

import copy
import hashlib
import re
from typing import Any

from vmplane.sandbox.gcp.compute import Call, handler
from vmplane.sandbox.gcp.errors import ApiError, invalid
from vmplane.sandbox.gcp.iam import checked_policy
from vmplane.sandbox.gcp.paging import page
from vmplane.sandbox.gcp.schema import require_body
from vmplane.sandbox.gcp.store import Project, Resource, State, check_labels, now, public

SECRET_ID = re.compile(r"[a-zA-Z_0-9-]{1,255}")
SA_TOKEN = "sandbox-sa:"  # `Authorization: Bearer sandbox-sa:EMAIL` is service account EMAIL calling
EMPTY_ETAG = "ACAB"  # the etag of a policy never set, as Google answers it
PAGE_CAP = 25000  # pageSize above it is capped (the discovery document)
_MUTABLE = ("labels", "annotations", "versionAliases")
_UNEMULATED = ("rotation", "topics", "ttl", "expireTime", "versionDestroyTtl", "tags", "secretType")
# The permissions each predefined role grants (the part the sandbox checks or reports).
_READ = {"secretmanager.secrets.get", "secretmanager.secrets.getIamPolicy", "secretmanager.versions.get"}
ROLE_PERMISSIONS = {
    "roles/secretmanager.secretAccessor": {"secretmanager.versions.access"},
    "roles/secretmanager.viewer": _READ | {"secretmanager.secrets.list", "secretmanager.versions.list"},
    "roles/secretmanager.admin": {"*"},
    "roles/owner": {"*"},
}


def unemulated(what: str) -> ApiError:
    return ApiError(501, "notImplemented", f"the sandbox does not emulate Secret Manager {what}", "UNIMPLEMENTED")


def project_of(state: State, ref: str) -> Project:
    """The project a name's `projects/X` means: X is an id, or a number the sandbox has handed out."""
    if ref.isdigit():
        for project in state.projects.values():
            if project.number == ref:
                return project
        raise ApiError(404, "notFound", f"Project {ref} not found.", "NOT_FOUND")
    return state.project(ref)


def secret_name(project: Project, secret_id: str) -> str:
    return f"projects/{project.number}/secrets/{secret_id}"


def secret_of(state: State, name: str) -> tuple[Project, Resource]:
    """`projects/P/secrets/S[/...]`: the project and the secret, 404 in Google's words when it is not there."""
    parts = name.split("/")
    project = project_of(state, parts[1])
    found = project.secrets.get(parts[3])
    if found is None:
        raise ApiError(404, "notFound", f"Secret [{secret_name(project, parts[3])}] not found.", "NOT_FOUND")
    return project, found


def new_etag(state: State) -> str:
    """Google's secret and version etags are a quoted hex string that changes with every write."""
    return f'"{state.new_generation():x}"'


def check_etag(given: Any, current: str) -> None:
    if given and given != current:
        raise ApiError(409, "aborted", f"The etag provided, {given}, does not match the current etag.", "ABORTED")


def caller(call: Call) -> str:
    """Who is calling: `serviceAccount:EMAIL` for the sandbox's service-account token, a digest of any
    other bearer token (never the token), `anonymous` without one."""
    scheme, _, token = call.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return "anonymous"
    token = token.strip()
    if token.startswith(SA_TOKEN):
        return "serviceAccount:" + token.removeprefix(SA_TOKEN)
    return "token:" + hashlib.sha256(token.encode()).hexdigest()[:16]


def granted(project: Project, secret: Resource, who: str, permission: str) -> bool:
    """The caller holds `permission` on the secret: owner unless a service account, else by a binding on
    the secret or its project whose role grants it (conditions are not evaluated)."""
    if not who.startswith("serviceAccount:"):
        return True
    for policy in (secret["_policy"], project.policy):
        for binding in policy.get("bindings", []):
            perms = ROLE_PERMISSIONS.get(str(binding.get("role")), set())
            if who in binding.get("members", []) and ("*" in perms or permission in perms):
                return True
    return False


def _check_replication(replication: Any) -> Resource:
    if not isinstance(replication, dict) or not replication:
        raise invalid("Secret.replication is required.")
    if ("automatic" in replication) == ("userManaged" in replication):
        raise invalid("Secret.replication must set exactly one of automatic or user_managed.")
    if "automatic" in replication:
        if (replication["automatic"] or {}).get("customerManagedEncryption"):
            raise unemulated("customer-managed encryption")
        return {"automatic": {}}
    replicas = (replication["userManaged"] or {}).get("replicas") or []
    if not replicas:
        raise invalid("Secret.replication.user_managed.replicas must not be empty.")
    seen: set[str] = set()
    for i, replica in enumerate(replicas):
        location = replica.get("location")
        if not location:
            raise invalid(f"Secret.replication.user_managed.replicas[{i}].location is required.")
        if location in seen:
            raise invalid(f"Secret.replication.user_managed.replicas has duplicate location {location}.")
        if replica.get("customerManagedEncryption"):
            raise unemulated("customer-managed encryption")
        seen.add(location)
    return {"userManaged": {"replicas": [{"location": r["location"]} for r in replicas]}}


def _check_aliases(secret: Resource, aliases: Any) -> None:
    count = len(secret["_versions"])
    for alias, number in (aliases or {}).items():
        if alias == "latest" or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]{0,62}", alias):
            raise invalid(f"Invalid version alias '{alias}'.")
        if not 1 <= int(number) <= count:
            raise invalid(f"Version alias '{alias}' names version {number}, which does not exist.")


def _mutable(secret: Resource, given: Resource, fields: tuple[str, ...], where: str) -> None:
    for key in fields:
        if key == "labels":
            check_labels(given.get("labels"), f"{where}.labels")
        if key == "versionAliases":
            _check_aliases(secret, given.get("versionAliases"))
        if given.get(key):
            secret[key] = {k: str(v) for k, v in given[key].items()}
        else:
            secret.pop(key, None)


@handler("secretmanager.projects.secrets.create")
def _create(call: Call) -> Resource:
    project = project_of(call.state, call.params["parent"].split("/")[1])
    body = require_body(call.body, "secret")
    secret_id = call.query.get("secretId", "")
    if not SECRET_ID.fullmatch(secret_id):
        raise invalid(
            f"Invalid secret_id '{secret_id}': it must be 1 to 255 characters of letters, digits, '-' and '_'."
        )
    for key in _UNEMULATED:
        if key in body:
            raise unemulated(f"Secret.{key}")
    if secret_id in project.secrets:
        raise ApiError(
            409, "alreadyExists", f"Secret [{secret_name(project, secret_id)}] already exists.", "ALREADY_EXISTS"
        )
    secret: Resource = {
        "name": secret_name(project, secret_id),
        "replication": _check_replication(body.get("replication")),
        "createTime": now(),
        "etag": new_etag(call.state),
        "_versions": [],
        "_policy": {"etag": EMPTY_ETAG},
    }
    _mutable(secret, body, _MUTABLE, "secret")
    project.secrets[secret_id] = secret
    return public(secret)


@handler("secretmanager.projects.secrets.get")
def _get(call: Call) -> Resource:
    return public(secret_of(call.state, call.params["name"])[1])


_TERM = re.compile(r"(labels\.[a-z][a-z0-9_-]*|name)\s*([:=])\s*(\S+)")


def _matches(secret: Resource, text: str) -> bool:
    """Secret Manager's list filter, the part the sandbox reads: `labels.K=V`, `labels.K:V`, `name:SUB`
    terms joined by spaces or AND; anything else is refused rather than ignored."""
    for term in (t for t in re.split(r"\s+(?:AND\s+)?", text.strip()) if t):
        found = _TERM.fullmatch(term)
        if found is None:
            raise unemulated(f"the list filter term '{term}'")
        field, op, want = found.groups()
        want = want.strip('"')
        if field == "name":
            have = secret["name"].rsplit("/", 1)[1]
        else:
            have = secret.get("labels", {}).get(field.removeprefix("labels."))
            if have is None:
                return False
        if (op == "=" and have != want) or (op == ":" and want not in have):
            return False
    return True


@handler("secretmanager.projects.secrets.list")
def _list(call: Call) -> Resource:
    project = project_of(call.state, call.params["parent"].split("/")[1])
    wanted = [public(s) for s in project.secrets.values() if _matches(s, str(call.query.get("filter") or ""))]
    return listed(call, "secrets", wanted)


def listed(call: Call, field: str, found: list[Resource]) -> Resource:
    """A list's answer: one page of `found` under `field` (left out when empty, as proto3 JSON does),
    `totalSize` and the next page's token while more remain."""
    items, token = page(call.state, call.query, found, PAGE_CAP)
    answer: Resource = {"totalSize": len(found)}
    if items:
        answer[field] = items
    if token:
        answer["nextPageToken"] = token
    return answer


@handler("secretmanager.projects.secrets.patch")
def _patch(call: Call) -> Resource:
    _, secret = secret_of(call.state, call.params["name"])
    body = require_body(call.body, "secret")
    mask = [f.strip() for f in str(call.query.get("updateMask") or "").split(",") if f.strip()]
    if not mask:
        raise invalid("update_mask is required and must name at least one field.")
    check_etag(body.get("etag"), secret["etag"])
    for key in mask:
        if key == "replication":
            raise invalid("Secret.replication is immutable and cannot be updated.")
        if key in _UNEMULATED:
            raise unemulated(f"Secret.{key}")
        if key not in _MUTABLE:
            raise invalid(f"Invalid update_mask field '{key}'.")
    _mutable(secret, body, tuple(mask), "secret")
    secret["etag"] = new_etag(call.state)
    return public(secret)


@handler("secretmanager.projects.secrets.delete")
def _delete(call: Call) -> Resource:
    project, secret = secret_of(call.state, call.params["name"])
    check_etag(call.query.get("etag"), secret["etag"])
    del project.secrets[secret["name"].rsplit("/", 1)[1]]  # its versions and policy go with it
    return {}


def _secret_role(role: str) -> bool:
    """Only Secret Manager's roles (and custom ones) are grantable on a secret, not basic or other roles."""
    return role.startswith(("roles/secretmanager.", "projects/", "organizations/"))


@handler("secretmanager.projects.secrets.getIamPolicy")
def _get_policy(call: Call) -> Resource:
    return copy.deepcopy(secret_of(call.state, call.params["resource"])[1]["_policy"])


@handler("secretmanager.projects.secrets.setIamPolicy")
def _set_policy(call: Call) -> Resource:
    _, secret = secret_of(call.state, call.params["resource"])
    secret["_policy"] = checked_policy(call.state, call.body, secret["_policy"]["etag"], _secret_role)
    return copy.deepcopy(secret["_policy"])


@handler("secretmanager.projects.secrets.testIamPermissions")
def _test_permissions(call: Call) -> Resource:
    project, secret = secret_of(call.state, call.params["resource"])
    asked = require_body(call.body, "testIamPermissionsRequest").get("permissions") or []
    who = caller(call)
    held = [p for p in asked if str(p).startswith("secretmanager.") and granted(project, secret, who, str(p))]
    return {"permissions": held} if held else {}


def dump(project: Project) -> dict[str, Resource]:
    """The project's secrets for `/_sandbox/state`: metadata, versions and policy, never a payload."""
    return {
        key: {
            **public(s),
            "versions": [public(v) for v in s["_versions"]],
            "iamPolicy": s["_policy"],
        }
        for key, s in project.secrets.items()
    }
