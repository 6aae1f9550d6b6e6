"""AWS Secrets Manager and SSM Parameter Store, as the control plane sees them: metadata only.

`problems` (plan, apply's precheck, stepValidate) and `versions` read DescribeSecret and
DescribeParameters, which answer no value. The one exception is a `#json-key`: only the value can say
whether the key is in it, so GetSecretValue is called, the key looked up, and the value dropped at once
(remembered by `observe.redact` first, so nothing could print it). A pinned SSM version is checked with
GetParameter `path:N` without decryption (a SecureString's value stays ciphertext) and dropped too.
The VM reads the values itself with its role (`grants` -> iam.ensure_secret_grants).

The operator's credentials need, for the checks: secretsmanager:DescribeSecret (and GetSecretValue for a
`#key`) on each secret, ssm:DescribeParameters, ssm:GetParameter on a pinned parameter, and kms:DescribeKey
on a customer key named by an alias.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from vmplane.clouds.aws.errors import aws_call
from vmplane.clouds.aws.naming import partition
from vmplane.clouds.aws.secret_policy import Grant, aws_refs, dns_suffix, parameter_arn
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.errors import AuthError, InvalidRequestError, NotFoundError
from vmplane.clouds.secret_access import SecretAccess
from vmplane.envspec.secrets import SecretRef, SecretStore
from vmplane.observe import redact

T = TypeVar("T")

IMDS_URL = "http://169.254.169.254"
CURRENT = "AWSCURRENT"
SECURE = "SecureString"


def _region_of_arn(arn: str) -> str | None:
    parts = arn.split(":")
    return parts[3] if arn.startswith("arn:") and len(parts) > 3 else None


class AwsSecretAccess(SecretAccess):
    def __init__(self, aws: AwsClients, *, memo: bool = False) -> None:
        """`memo`: each secret described once for this object's life (one check's problems, then its
        grants); off by default, so that `versions` always asks."""
        self.aws = aws
        self.region = aws.target.region
        self._memo: dict[tuple[str, str], Any] | None = {} if memo else None
        self._keys: dict[str, frozenset[str] | str] = {}  # a secret's JSON keys, for one `problems` call

    def _once(self, key: tuple[str, str], fetch: Callable[[], T]) -> T:
        if self._memo is None:
            return fetch()
        if key not in self._memo:
            self._memo[key] = fetch()
        out: T = self._memo[key]
        return out

    # ---- the two lookups everything here builds on ----
    def describe_secret(self, ref: SecretRef) -> dict[str, Any]:
        """DescribeSecret: ARN, KmsKeyId, DeletedDate, VersionIdsToStages; never the value."""
        return self._once(
            ("sm", ref.name), lambda: dict(aws_call(self.aws.secretsmanager.describe_secret, SecretId=ref.name))
        )

    def describe_parameter(self, ref: SecretRef) -> dict[str, Any] | None:
        """DescribeParameters for exactly this name: Type, KeyId, Version; never the value. None: no such."""

        def fetch() -> dict[str, Any] | None:
            found = aws_call(
                self.aws.ssm.describe_parameters,
                ParameterFilters=[{"Key": "Name", "Option": "Equals", "Values": [ref.name]}],
            )["Parameters"]
            return dict(found[0]) if found else None

        return self._once(("ssm", ref.name), fetch)

    # ---- SecretAccess ----
    def problems(self, refs: Mapping[str, SecretRef]) -> list[str]:
        seen: dict[str, str | None] = {}  # one lookup per reference, however many fields use it
        out = []
        self._keys = {}
        for path, ref in aws_refs(refs).items():
            if ref.text not in seen:
                seen[ref.text] = self._sm_problem(ref) if ref.store is SecretStore.aws_sm else self._ssm_problem(ref)
            if (why := seen[ref.text]) is not None:
                out.append(f"{path}: {ref.text}: {why}")
        return out

    def versions(self, refs: Mapping[str, SecretRef]) -> dict[str, str | None]:
        """aws-sm: the AWSCURRENT VersionId; aws-ssm: the pinned N, or the parameter's current Version."""
        out: dict[str, str | None] = {}
        for ref in aws_refs(refs).values():
            if ref.text in out:
                continue
            if ref.store is SecretStore.aws_ssm:
                out[ref.text] = ref.version or str(self._must_parameter(ref)["Version"])
            else:
                out[ref.text] = _current_version(self._must_secret(ref))
        return out

    def guest_source(self) -> dict[str, Any]:
        # On the sandbox both services are the sandbox's one endpoint. IMDS stays the link-local address:
        # the sandbox boots no VM, so no fetcher ever runs against it there (moto records SendCommand only).
        r = self.region
        sandbox = self.aws.target.endpoint_url
        return {
            "cloud": "aws",
            "region": r,
            "endpoints": {
                "imds": IMDS_URL,
                "secretsmanager": sandbox or f"https://secretsmanager.{r}.{dns_suffix(r)}",
                "ssm": sandbox or f"https://ssm.{r}.{dns_suffix(r)}",
            },
        }

    # ---- grants (the VM role's policy, iam.ensure_secret_grants) ----
    def grants(self, refs: Mapping[str, SecretRef], account: str) -> list[Grant]:
        """One Grant per referencing field, in field order, with each secret's real ARN and customer key."""
        keys: dict[str, str | None] = {}  # KmsKeyId -> key ARN, resolved once
        out = []
        for path, ref in aws_refs(refs).items():
            if ref.store is SecretStore.aws_sm:
                described = self._must_secret(ref, path)
                service, arn, key_id = "secretsmanager", str(described["ARN"]), described.get("KmsKeyId")
            else:
                param = self._must_parameter(ref, path)
                service, arn, key_id = "ssm", parameter_arn(self.region, account, ref.name), param.get("KeyId")
            if key_id and key_id not in keys:
                keys[key_id] = self._customer_key(str(key_id), account)
            out.append(Grant(path, service, arn, keys.get(key_id) if key_id else None))
        return out

    def _customer_key(self, key_id: str, account: str) -> str | None:
        """The key's ARN if it is customer managed (the `aws/...` keys grant through the service itself)."""
        if key_id.startswith("alias/aws/") or ":alias/aws/" in key_id:
            return None
        if key_id.startswith("arn:") and ":key/" in key_id:
            return key_id
        if not key_id.startswith(("alias/", "arn:")):  # a bare key id
            return f"arn:{partition(self.region)}:kms:{self.region}:{account}:key/{key_id}"
        meta = aws_call(self.aws.kms.describe_key, KeyId=key_id)["KeyMetadata"]  # an alias: its key
        return None if meta.get("KeyManager") == "AWS" else str(meta["Arn"])

    # ---- the checks ----
    def _sm_problem(self, ref: SecretRef) -> str | None:
        where = _region_of_arn(ref.name)
        if where is not None and where != self.region:
            return f"the secret is in {where}; the VMs read Secrets Manager in {self.region} (copy or replicate it)"
        try:
            described = self.describe_secret(ref)
        except NotFoundError:
            return f"no such secret in Secrets Manager ({self.region})"
        except AuthError as e:
            return (
                f"the credentials may not read its metadata ({e.code}): they need secretsmanager:DescribeSecret on it"
            )
        if described.get("DeletedDate"):
            return (
                f"the secret is scheduled for deletion ({described['DeletedDate']}): the VMs could not read it; "
                "`aws secretsmanager restore-secret` restores it"
            )
        if _current_version(described) is None:
            return (
                f"the secret has no {CURRENT} version (no value yet): put one (`aws secretsmanager put-secret-value`)"
            )
        return self._json_key_problem(ref) if ref.json_key else None

    def _json_key_problem(self, ref: SecretRef) -> str | None:
        """Only the value can say whether it holds the key: read once per secret, its keys kept, dropped."""
        if ref.name not in self._keys:
            self._keys[ref.name] = self._json_keys(ref)
        keys = self._keys[ref.name]
        if isinstance(keys, str):
            return keys.replace("#KEY", f"#{ref.json_key}")
        if ref.json_key not in keys:
            return f"the secret's JSON object has no key {ref.json_key!r}"
        return None

    def _json_keys(self, ref: SecretRef) -> frozenset[str] | str:
        """The secret's top-level JSON keys (never its values), or why there are none (`#KEY` for the key)."""
        try:
            got = aws_call(self.aws.secretsmanager.get_secret_value, SecretId=ref.name)
        except AuthError as e:
            return (
                f"checking #KEY reads the value, which the credentials may not ({e.code}): they need "
                "secretsmanager:GetSecretValue on it (and kms:Decrypt on its key)"
            )
        text = got.get("SecretString")
        del got  # the answer holds the value: nothing of it outlives this check
        if not isinstance(text, str):
            return "the secret is binary: #KEY needs a JSON object as its SecretString"
        redact.remember([text])
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        del text
        if not isinstance(value, dict):
            return "the secret's value is not a JSON object, so it has no key #KEY"
        redact.remember([str(v) for v in value.values()])
        return frozenset(value)

    def _ssm_problem(self, ref: SecretRef) -> str | None:
        try:
            param = self.describe_parameter(ref)
        except AuthError as e:
            return f"the credentials may not read parameters' metadata ({e.code}): they need ssm:DescribeParameters"
        if param is None:
            return f"no such parameter in SSM Parameter Store ({self.region})"
        if param.get("Type") != SECURE:
            return (
                f"the parameter is a {param.get('Type')}, stored in clear: store secrets as SecureString "
                "(`aws ssm put-parameter --type SecureString`)"
            )
        if ref.version and int(ref.version) != int(param.get("Version", 0)):
            try:  # without decryption: the answer's value is ciphertext, and dropped at once
                aws_call(self.aws.ssm.get_parameter, Name=f"{ref.name}:{ref.version}", WithDecryption=False)
            except NotFoundError:
                return f"the parameter has no version {ref.version} (its current version is {param.get('Version')})"
            except AuthError as e:
                return f"the credentials may not read the parameter ({e.code}): they need ssm:GetParameter on it"
        return None

    def _must_secret(self, ref: SecretRef, path: str | None = None) -> dict[str, Any]:
        try:
            return self.describe_secret(ref)
        except NotFoundError as e:
            raise InvalidRequestError(f"{_at(path, ref)}no such secret in Secrets Manager ({self.region})") from e

    def _must_parameter(self, ref: SecretRef, path: str | None = None) -> dict[str, Any]:
        param = self.describe_parameter(ref)
        if param is None:
            raise InvalidRequestError(f"{_at(path, ref)}no such parameter in SSM Parameter Store ({self.region})")
        return param


def _at(path: str | None, ref: SecretRef) -> str:
    return f"{path}: {ref.text}: " if path else f"{ref.text}: "


def _current_version(described: Mapping[str, Any]) -> str | None:
    stages: Mapping[str, list[str]] = described.get("VersionIdsToStages") or {}
    return next((vid for vid, names in stages.items() if CURRENT in names), None)
