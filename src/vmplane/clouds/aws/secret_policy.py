"""The VM role's read access to exactly its referenced secrets, as a pure document (no SDK import:
`vmplane validate` checks its size).

One inline policy, `vmplane-secrets`, with one statement per referenced secret: `secretsmanager:GetSecretValue`
on the secret's real ARN (its 6-character suffix included, as DescribeSecret answers it: never a wildcard),
`ssm:GetParameter` on the parameter's ARN. A secret encrypted with a customer managed KMS key adds one
`kms:Decrypt` statement on that key, only through the secret's own service (`kms:ViaService`): the role
cannot use the key for anything else. Sids come from the first field that references the secret, so
they stay the same from one apply to the next.
"""

from __future__ import annotations

import hashlib
import json
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vmplane.clouds.aws.naming import partition
from vmplane.envspec.secrets import SecretRef, SecretStore

POLICY_NAME = "vmplane-secrets"
# IAM counts a role's inline policies together, without white space:
# https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html#reference_iam-quotas-entity-length
MAX_INLINE_CHARS = 10_240
ACTIONS = {"secretsmanager": "secretsmanager:GetSecretValue", "ssm": "ssm:GetParameter"}
KMS_DECRYPT = "kms:Decrypt"
AWS_STORES = (SecretStore.aws_sm, SecretStore.aws_ssm)
# What validate assumes before the cloud answers: an account id has 12 digits, a secret's ARN ends in
# "-" and 6 random characters. The real policy (precheck) can only be as long or longer (its KMS statements).
ANY_ACCOUNT = "123456789012"
_ANY_SUFFIX = "-AbCdEf"


@dataclass(frozen=True)
class Grant:
    """Read access to one secret: `field` is the first field that references it."""

    field: str
    service: str  # "secretsmanager" | "ssm"
    arn: str
    kms_key: str | None = None  # the customer managed key's ARN (None: an AWS managed key, or none)


def aws_refs(refs: Mapping[str, SecretRef]) -> dict[str, SecretRef]:
    """The references to AWS's stores (validate refuses another store on AWS; skipped here)."""
    return {path: ref for path, ref in refs.items() if ref.store in AWS_STORES}


def dns_suffix(region: str) -> str:
    return "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"


def parameter_arn(region: str, account: str, path: str) -> str:
    """`arn:aws:ssm:R:A:parameter/a/b` for `/a/b` (a name without a leading / gets one)."""
    return f"arn:{partition(region)}:ssm:{region}:{account}:parameter/{path.lstrip('/')}"


def secret_arn(region: str, account: str, name: str) -> str:
    return f"arn:{partition(region)}:secretsmanager:{region}:{account}:secret:{name}"


def sid(field: str, tail: str = "") -> str:
    """`runtime.env.DB_PASSWORD` -> `EnvDBPASSWORD` + 8 hex of the path (Sids are alphanumeric, so two
    paths that differ only in punctuation would otherwise meet)."""
    words = re.findall(r"[A-Za-z0-9]+", field.removeprefix("runtime."))
    base = "".join(w[:1].upper() + w[1:] for w in words)[:48]
    return f"{base}{tail}{hashlib.sha256(field.encode()).hexdigest()[:8]}"


def statements(grants: list[Grant], region: str) -> list[dict[str, Any]]:
    """One statement per secret (by ARN), then one kms:Decrypt per customer key and service."""
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for g in grants:
        if (g.service, g.arn) in seen:
            continue  # two fields, one secret (two #keys of one JSON secret): one statement
        seen.add((g.service, g.arn))
        out.append({"Sid": sid(g.field), "Effect": "Allow", "Action": ACTIONS[g.service], "Resource": g.arn})
    for g in grants:
        if g.kms_key is None or (g.service, g.kms_key) in seen:
            continue
        seen.add((g.service, g.kms_key))
        out.append(
            {
                "Sid": sid(g.field, "Kms"),
                "Effect": "Allow",
                "Action": KMS_DECRYPT,
                "Resource": g.kms_key,
                "Condition": {"StringEquals": {"kms:ViaService": f"{g.service}.{region}.{dns_suffix(region)}"}},
            }
        )
    return out


def policy_document(grants: list[Grant], region: str) -> dict[str, Any] | None:
    """The inline policy, or None when nothing is referenced (then the role has none)."""
    if not grants:
        return None
    return {"Version": "2012-10-17", "Statement": statements(grants, region)}


def summary(doc: Mapping[str, Any] | str | None) -> list[str]:
    """`"Action Resource"` per statement, sorted (a kms statement adds its `via` service): what the record
    keeps and drift compares, whatever order or Sids the role's copy has."""
    # boto3 decodes IAM's URL-encoded JSON, but its stubs allow the raw text too
    parsed: Mapping[str, Any] = json.loads(urllib.parse.unquote(doc)) if isinstance(doc, str) else doc or {}
    out = []
    for st in parsed.get("Statement", []):
        via = st.get("Condition", {}).get("StringEquals", {}).get("kms:ViaService")
        out.append(f"{st.get('Action')} {st.get('Resource')}" + (f" via {via}" if via else ""))
    return sorted(out)


def policy_text(doc: dict[str, Any]) -> str:
    """As sent to PutRolePolicy: compact, keys sorted (IAM's size counts no white space)."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def size_problem(grants: list[Grant], region: str) -> str | None:
    """`"<field>: ..."` when the policy would not fit IAM's inline-policy limit, at the first field that
    does not fit (the grants are in field order); None when it fits."""
    doc = policy_document(grants, region)
    if doc is None or len(policy_text(doc)) <= MAX_INLINE_CHARS:
        return None
    for n in range(1, len(grants) + 1):
        part = policy_document(grants[:n], region)
        if part is not None and len(policy_text(part)) > MAX_INLINE_CHARS:
            total = len(policy_text(doc))
            return (
                f"{grants[n - 1].field}: the VM role's secrets policy would be {total} characters, over IAM's "
                f"{MAX_INLINE_CHARS} for a role's inline policies: reference fewer secrets (one JSON secret "
                "read with several #keys is one statement)"
            )
    return None  # unreachable: the whole document is over the limit


def estimated_grants(refs: Mapping[str, SecretRef], region: str) -> list[Grant]:
    """The grants as validate can know them, with no cloud call: the ARNs' shape with any account."""
    out = []
    for path, ref in aws_refs(refs).items():
        if ref.store is SecretStore.aws_ssm:
            out.append(Grant(path, "ssm", parameter_arn(region, ANY_ACCOUNT, ref.name)))
        elif ref.name.startswith("arn:"):
            out.append(Grant(path, "secretsmanager", ref.name))
        else:
            out.append(Grant(path, "secretsmanager", secret_arn(region, ANY_ACCOUNT, ref.name + _ANY_SUFFIX)))
    return out
