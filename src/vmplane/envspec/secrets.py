"""Secrets by reference: a runtime value may be `{"secret": "<ref>"}` instead of plain text.

A reference names where the value lives, never the value: the file, the job's record, the generated
stack and its state hold only the reference, and the VM reads the value itself with its own identity
(the exec channel's push and the stack's boot fetch). The stores:

- `aws-sm:NAME[#json-key]`: AWS Secrets Manager, by name or ARN, its AWSCURRENT version; `#key` picks
  one key of a JSON secret.
- `aws-ssm:/path[:N]`: an SSM Parameter Store SecureString; `:N` pins version N.
- `gcp-sm:NAME[/versions/N]`: Google Secret Manager, by secret id or `projects/P/secrets/NAME`; without a
  version (or with `latest`) the latest enabled one.
- `env:VAR`: the operator's environment when vmplane pushes (Proxmox VE, which has no store): read at
  push time and sent through the guest agent, never stored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Discriminator, Field, Tag, field_validator

from vmplane.envspec.base import SpecModel

if TYPE_CHECKING:
    from vmplane.envspec.models import EnvSpec


class SecretStore(StrEnum):
    aws_sm = "aws-sm"
    aws_ssm = "aws-ssm"
    gcp_sm = "gcp-sm"
    env = "env"


STORE_NAMES = {
    SecretStore.aws_sm: "AWS Secrets Manager",
    SecretStore.aws_ssm: "SSM Parameter Store (SecureString)",
    SecretStore.gcp_sm: "Google Secret Manager",
    SecretStore.env: "the operator's environment at push time",
}

_AWS_SM_NAME = r"[A-Za-z0-9/_+=.@-]{1,512}"
_AWS_SM_ARN = r"arn:aws(?:-cn|-us-gov)?:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]{1,512}"
_SSM_PATH = r"/[A-Za-z0-9_./-]{1,1010}"
_GCP_ID = r"[A-Za-z0-9_-]{1,255}"
# A project id, or its number: Google's own resource names (the console's, the API's) carry the number.
_GCP_PROJECT = r"[a-z][-a-z0-9]{4,28}[a-z0-9]|[0-9]{1,19}"
_ENV_VAR = r"[A-Za-z_][A-Za-z0-9_]*"

_GRAMMAR: dict[SecretStore, re.Pattern[str]] = {
    SecretStore.aws_sm: re.compile(rf"(?P<name>{_AWS_SM_ARN}|{_AWS_SM_NAME})(?:#(?P<key>[^#]{{1,256}}))?"),
    SecretStore.aws_ssm: re.compile(rf"(?P<name>{_SSM_PATH}?)(?::(?P<version>[1-9][0-9]{{0,8}}))?"),
    SecretStore.gcp_sm: re.compile(
        rf"(?P<name>(?:projects/(?:{_GCP_PROJECT})/secrets/)?{_GCP_ID})(?:/versions/(?P<version>[1-9][0-9]{{0,8}}|latest))?"
    ),
    SecretStore.env: re.compile(rf"(?P<name>{_ENV_VAR})"),
}
# (the form, what its parts are): a warning's hint quotes the form alone, inside the JSON it suggests.
_FORMS = {
    SecretStore.aws_sm: ("aws-sm:NAME[#json-key]", "a secret name or ARN"),
    SecretStore.aws_ssm: ("aws-ssm:/path[:N]", "a parameter path from /, N a version"),
    SecretStore.gcp_sm: ("gcp-sm:NAME[/versions/N]", "a secret id or projects/P/secrets/NAME"),
    SecretStore.env: ("env:VAR", "an environment variable name"),
}
_SYNTAX = {store: f"{form} ({parts})" for store, (form, parts) in _FORMS.items()}
# What a JSON Schema editor checks; the parser below gives the precise message.
REF_PATTERN = r"^(aws-sm|aws-ssm|gcp-sm|env):\S+$"
SYNTAX_HELP = "; ".join(_SYNTAX.values())


@dataclass(frozen=True)
class SecretRef:
    """A parsed reference. `version` is the pinned version (None: the store's current one)."""

    store: SecretStore
    name: str
    version: str | None = None
    json_key: str | None = None

    @property
    def pinned(self) -> bool:
        return self.version is not None

    @property
    def text(self) -> str:
        tail = {
            SecretStore.aws_sm: f"#{self.json_key}" if self.json_key else "",
            SecretStore.aws_ssm: f":{self.version}" if self.version else "",
            SecretStore.gcp_sm: f"/versions/{self.version}" if self.version else "",
            SecretStore.env: "",
        }[self.store]
        return f"{self.store.value}:{self.name}{tail}"

    def __str__(self) -> str:
        return self.text


def parse_ref(text: str) -> SecretRef:
    """The reference `text` names, or ValueError saying which syntax it breaks."""
    store_name, sep, rest = text.partition(":")
    if not sep or store_name not in SecretStore.__members__.values():
        raise ValueError(f"{text!r} is not a secret reference; use one of: {SYNTAX_HELP}")
    store = SecretStore(store_name)
    m = _GRAMMAR[store].fullmatch(rest)
    if m is None:
        raise ValueError(f"{text!r} does not match {_SYNTAX[store]}")
    groups = m.groupdict()
    version = groups.get("version")
    if version == "latest":
        version = None  # the same as leaving it out: the store's current version
    return SecretRef(store, groups["name"], version, groups.get("key"))


class Secret(SpecModel):
    """A runtime value kept in a secret store: the VM reads it, vmplane never does."""

    # The pattern is for editors; the validator gives the message that names the store's syntax.
    secret: str = Field(
        description=f"Where the value lives: {SYNTAX_HELP}. Only the reference is ever stored.",
        json_schema_extra={"pattern": REF_PATTERN},
    )

    @field_validator("secret")
    @classmethod
    def _parses(cls, v: str) -> str:
        parse_ref(v)
        return v

    @property
    def ref(self) -> SecretRef:
        return parse_ref(self.secret)


def _value_kind(value: Any) -> str:
    return "secret-ref" if isinstance(value, dict | Secret) else "plain-value"


# Tagged by shape, so an object is checked only as a reference (one error at `….secret`, not one per member).
RuntimeValue = Annotated[
    Annotated[str, Tag("plain-value")] | Annotated[Secret, Tag("secret-ref")], Discriminator(_value_kind)
]

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Names that usually hold a secret; a plain value under one gets a warning pointing at the syntax.
_SECRET_LIKE = re.compile(r"PASSWORD|PASSWD|SECRET|TOKEN|KEY|CREDENTIAL|PRIVATE", re.IGNORECASE)


def field_path(kind: str, key: str) -> str:
    """`runtime.env.NAME` or `runtime.files["/path"]`: the path form errors and plans use."""
    return f"runtime.{kind}.{key}" if _WORD.fullmatch(key) else f'runtime.{kind}["{key}"]'


def secret_refs(spec: EnvSpec) -> dict[str, SecretRef]:
    """Every referenced secret, keyed by its field path, in a stable order (env, then files)."""
    out: dict[str, SecretRef] = {}
    for kind, values in (("env", spec.runtime.env), ("files", spec.runtime.files)):
        for key, value in sorted(values.items()):
            if isinstance(value, Secret):
                out[field_path(kind, key)] = value.ref
    return out


def secret_like(key: str) -> bool:
    """A variable name or file path (by its base name) that usually holds a secret: DB_PASSWORD, tls.key."""
    return _SECRET_LIKE.search(key.rsplit("/", 1)[-1]) is not None


def plain_secret_warnings(spec: EnvSpec, example: SecretStore | None) -> list[str]:
    """Plain-text values whose name says they are secret, each with the reference to use instead."""
    hint = _FORMS[example][0] if example else " | ".join(form for form, _ in _FORMS.values())
    out = []
    for kind, values in (("env", spec.runtime.env), ("files", spec.runtime.files)):
        for key, value in sorted(values.items()):
            name = key.rsplit("/", 1)[-1]
            if isinstance(value, str) and value and (m := _SECRET_LIKE.search(name)):
                out.append(
                    f"{field_path(kind, key)}: looks like a secret ({m.group(0).upper()} in its name) but is "
                    f'plain text, stored in the job record and the generated stack; use {{"secret": "{hint}"}}'
                )
    return out
