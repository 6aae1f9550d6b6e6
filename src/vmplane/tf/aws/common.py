"""Shared pieces of the AWS stack: versions, name prefixes, the tag map of a resource."""

from __future__ import annotations

from typing import Any

from vmplane.tf.hcl import Expr, Value

PROVIDER_VERSION = "5.100.0"
TF_VERSION = ">= 1.6"
E = Expr
# "vmplane-<org>-<env>": the prefix of the names the direct pipeline gives (security groups, templates, ...).
BASE = "vmplane-${local.identity.org}-${local.identity.name}"
OWNER = "${local.identity.org}/${local.identity.name}"


def tag_map(role: str, name: str) -> dict[Any, Value]:
    return {E("(local.role_key)"): role, "Name": E(name)}
