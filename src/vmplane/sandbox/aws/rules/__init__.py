"""The AWS fidelity catalogue: what AWS refuses (or does) that moto does not, one module per service family.

The strict layer runs `rules_for(service, operation)` on each request after botocore's model check and
before moto; `python -m vmplane.sandbox.aws.rules --markdown` prints the README's table."""

from __future__ import annotations

from functools import cache

from vmplane.sandbox.aws.rule import Rule
from vmplane.sandbox.aws.rules import (
    acm,
    autoscaling,
    ec2_instances,
    ec2_network,
    ec2_routes,
    ec2_tags_groups,
    elbv2,
    iam,
    more,
    route53,
    s3_ssm,
    scheduler,
)

RULES: tuple[Rule, ...] = (
    *ec2_network.RULES,
    *ec2_routes.RULES,
    *ec2_tags_groups.RULES,
    *ec2_instances.RULES,
    *elbv2.RULES,
    *acm.RULES,
    *route53.RULES,
    *iam.RULES,
    *autoscaling.RULES,
    *s3_ssm.RULES,
    *scheduler.RULES,
    *more.RULES,
)


@cache
def rules_for(service: str, operation: str) -> tuple[Rule, ...]:
    return tuple(r for r in RULES if r.service == service and operation in r.operations)


def markdown() -> str:
    """The README's table: one line per rule, in catalogue order."""
    lines = ["| id | what AWS does | code | source |", "|---|---|---|---|"]
    for r in RULES:
        lines.append(f"| `{r.id}` | {r.summary} | `{r.code}` | [{_label(r.source)}]({r.source}) |")
    return "\n".join(lines) + "\n"


def _label(url: str) -> str:
    if "github.com" in url:
        parts = url.rstrip("/").split("/")
        return f"{parts[3]}/{parts[4]}#{parts[-1]}"
    return url.rstrip("/").rsplit("/", 1)[-1].split(".html")[0] or url
