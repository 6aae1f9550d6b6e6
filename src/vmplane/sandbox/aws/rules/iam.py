"""IAM: a role's trust policy checked as AWS does (moto stores any string), names unique regardless of
case, and the per-role quotas (10 managed policies, 10,240 characters of inline policy)."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from vmplane.sandbox.aws.rule import AwsFault, AwsRequest, Clients
from vmplane.sandbox.aws.rules._common import backend, fault, make_rule, p, request

_PRINCIPAL = "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_principal.html"
_TRUST = "https://docs.aws.amazon.com/IAM/latest/APIReference/API_CreateRole.html"
_QUOTAS = "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html"
_NAMES = "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html"
_TRUST_OPS = ("CreateRole", "UpdateAssumeRolePolicy")
_EC2_TRUST = {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}


def _document(req: AwsRequest) -> str:
    return str(p(req, "AssumeRolePolicyDocument") or p(req, "PolicyDocument") or "")


def _statements(req: AwsRequest) -> list[dict[str, Any]] | None:
    try:
        doc = json.loads(_document(req))
    except ValueError:
        return None
    found = doc.get("Statement", []) if isinstance(doc, dict) else []
    return [s for s in ([found] if isinstance(found, dict) else found) if isinstance(s, dict)]


def _malformed(message: str) -> AwsFault:
    return fault("MalformedPolicyDocument", message)


def _not_json(req: AwsRequest) -> AwsFault | None:
    try:
        doc = json.loads(_document(req))
    except ValueError:
        return _malformed("This policy contains invalid Json")
    if not isinstance(doc, dict) or "Statement" not in doc:
        return _malformed("Syntax errors in policy.")
    return None


def _resource(req: AwsRequest) -> AwsFault | None:
    if any("Resource" in s or "NotResource" in s for s in _statements(req) or ()):
        return _malformed("Has prohibited field Resource")
    return None


def _principal(req: AwsRequest) -> AwsFault | None:
    if any("Principal" not in s and "NotPrincipal" not in s for s in _statements(req) or ()):
        return _malformed("Missing required field Principal")
    return None


def _actions(req: AwsRequest) -> AwsFault | None:
    for statement in _statements(req) or ():
        actions = statement.get("Action", [])
        for action in [actions] if isinstance(actions, str) else actions:
            if not str(action).lower().startswith("sts:"):
                return _malformed("AssumeRole policy may only specify STS AssumeRole actions.")
    return None


def _version(req: AwsRequest) -> AwsFault | None:
    try:
        doc = json.loads(_document(req))
    except ValueError:
        return None
    if isinstance(doc, dict) and doc.get("Version", "2012-10-17") not in ("2012-10-17", "2008-10-17"):
        return _malformed("The policy failed legacy parsing")
    return None


def _service_principal(req: AwsRequest) -> AwsFault | None:
    for statement in _statements(req) or ():
        principal = statement.get("Principal")
        services = principal.get("Service", []) if isinstance(principal, dict) else []
        for service in [services] if isinstance(services, str) else services:
            if "." not in str(service):
                return _malformed(f'Invalid principal in policy: "SERVICE":"{service}"')
    return None


def _trust(statement: dict[str, Any] | None = None, raw: str | None = None, version: str = "2012-10-17") -> str:
    return raw if raw is not None else json.dumps({"Version": version, "Statement": [statement or _EC2_TRUST]})


def _role(document: str, name: str = "web") -> Any:
    return lambda clients: request("iam", "CreateRole", RoleName=name, AssumeRolePolicyDocument=document)


def _names_taken(req: AwsRequest, kind: str) -> AwsFault | None:
    iam = backend("iam", req)
    if kind == "role":
        name, taken = str(p(req, "RoleName", "")), [r.name for r in iam.roles.values()]
    else:
        name, taken = str(p(req, "InstanceProfileName", "")), [i.name for i in iam.instance_profiles.values()]
    if any(t.lower() == name.lower() and t != name for t in taken):
        what = "Role" if kind == "role" else "Instance Profile"
        return fault("EntityAlreadyExists", f"{what} with name {name} already exists.", 409)
    return None


def _ex_role_case(clients: Clients) -> AwsRequest:
    clients("iam").create_role(RoleName="Web", AssumeRolePolicyDocument=_trust())
    return request("iam", "CreateRole", RoleName="web", AssumeRolePolicyDocument=_trust())


def _ex_profile_case(clients: Clients) -> AwsRequest:
    clients("iam").create_instance_profile(InstanceProfileName="Web")
    return request("iam", "CreateInstanceProfile", InstanceProfileName="web")


def _role_named(req: AwsRequest) -> Any:
    return next((r for r in backend("iam", req).roles.values() if r.name == p(req, "RoleName")), None)


def _managed_quota(req: AwsRequest) -> AwsFault | None:
    role = _role_named(req)
    if role is not None and p(req, "PolicyArn") not in role.managed_policies and len(role.managed_policies) >= 10:
        return fault("LimitExceeded", "Cannot exceed quota for PoliciesPerRole: 10", 409)
    return None


def _ex_managed_quota(clients: Clients) -> AwsRequest:
    iam = clients("iam")
    iam.create_role(RoleName="web", AssumeRolePolicyDocument=_trust())
    doc = json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}]}
    )
    arns = [iam.create_policy(PolicyName=f"p{i}", PolicyDocument=doc)["Policy"]["Arn"] for i in range(11)]
    for arn in arns[:10]:
        iam.attach_role_policy(RoleName="web", PolicyArn=arn)
    return request("iam", "AttachRolePolicy", RoleName="web", PolicyArn=arns[10])


def _inline_quota(req: AwsRequest) -> AwsFault | None:
    role = _role_named(req)
    if role is None:
        return None
    others = sum(
        len(json.dumps(doc) if not isinstance(doc, str) else doc)
        for n, doc in role.policies.items()
        if n != p(req, "PolicyName")
    )
    if others + len(str(p(req, "PolicyDocument", ""))) > 10240:
        return fault("LimitExceeded", "Maximum policy size of 10240 bytes exceeded for role web", 409)
    return None


def _ex_inline_quota(clients: Clients) -> AwsRequest:
    clients("iam").create_role(RoleName="web", AssumeRolePolicyDocument=_trust())
    actions = [f"s3:GetObject{'x' * 30}{i}" for i in range(300)]
    doc = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]})
    return request("iam", "PutRolePolicy", RoleName="web", PolicyName="big", PolicyDocument=doc)


_rule = partial(make_rule, "iam")


RULES = (
    _rule("trust-policy-json", _TRUST_OPS, "A trust policy must be a JSON policy document with a Statement",
          _TRUST, _not_json, "MalformedPolicyDocument", _role(_trust(raw="{not json"))),
    _rule("trust-policy-no-resource", _TRUST_OPS, "A trust policy statement may not name a Resource", _PRINCIPAL,
          _resource, "MalformedPolicyDocument", _role(_trust({**_EC2_TRUST, "Resource": "*"}))),
    _rule("trust-policy-principal", _TRUST_OPS, "A trust policy statement must name a Principal", _PRINCIPAL,
          _principal, "MalformedPolicyDocument",
          _role(_trust({"Effect": "Allow", "Action": "sts:AssumeRole"}))),
    _rule("trust-policy-sts-actions", _TRUST_OPS, "A trust policy may only allow sts: actions", _PRINCIPAL,
          _actions, "MalformedPolicyDocument", _role(_trust({**_EC2_TRUST, "Action": "ec2:RunInstances"}))),
    _rule("trust-policy-version", _TRUST_OPS, "A policy Version is 2012-10-17 or 2008-10-17",
          "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_version.html", _version,
          "MalformedPolicyDocument", _role(_trust(version="2024-01-01"))),
    _rule("trust-policy-service-principal", _TRUST_OPS,
          "A service principal is a service's DNS name (ec2.amazonaws.com)",
          _PRINCIPAL, _service_principal, "MalformedPolicyDocument",
          _role(_trust({**_EC2_TRUST, "Principal": {"Service": "ec2"}}))),
    _rule("role-name-case-insensitive", ("CreateRole",), "Role names are unique regardless of case", _NAMES,
          lambda r: _names_taken(r, "role"), "EntityAlreadyExists", _ex_role_case),
    _rule("instance-profile-name-case-insensitive", ("CreateInstanceProfile",),
          "Instance profile names are unique regardless of case", _NAMES,
          lambda r: _names_taken(r, "profile"), "EntityAlreadyExists", _ex_profile_case),
    _rule("managed-policies-per-role", ("AttachRolePolicy",), "A role has at most 10 managed policies attached",
          _QUOTAS, _managed_quota, "LimitExceeded", _ex_managed_quota),
    _rule("inline-policy-size-per-role", ("PutRolePolicy",), "A role's inline policies total at most 10,240 characters",
          _QUOTAS, _inline_quota, "LimitExceeded", _ex_inline_quota),
)  # fmt: skip
