"""The GCP sandbox's fidelity catalogue: what Google refuses (or does) that the discovery documents alone
do not say, each rule with its source (a documentation page or a provider issue showing the real answer).

A rule with a `check` runs before the method's handler (server.py) and raises Google's `ApiError`;
a rule without one is enforced where the work happens (`where`: an in-use delete fails its operation in
compute.delete, a stale fingerprint is refused in compute.patch, ...). Every rule carries an `example`:
the requests (`Step`s) that set it up, the last one answering as `answer` says, so one parametrised test
drives each rule through the sandbox's HTTP front door. `old` is what the sandbox answered before the
rule, so the test's failure against the old sandbox is written down. The README's table is `table()`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vmplane.sandbox.gcp.compute import Call
from vmplane.sandbox.gcp.errors import ApiError, invalid

Check = Callable[[Call], None]


@dataclass(frozen=True)
class Step:
    http: str
    path: str  # "{p}" is the test's project: "/compute/v1/projects/{p}/global/networks"
    body: Any = None


@dataclass(frozen=True)
class Rule:
    id: str
    methods: tuple[str, ...]  # discovery method ids; "compute.*" is every compute method the check reads
    summary: str  # what Google refuses or does (the README's line)
    source: str
    answer: str  # "400 invalid", "412 conditionNotMet", "op QUOTA_EXCEEDED" (the operation's error), "page"
    old: str  # what the sandbox answered before this rule
    example: tuple[Step, ...]
    check: Check | None = field(default=None, compare=False)
    where: str = ""  # the module enforcing a rule without `check`


RULES: list[Rule] = []
_BY_METHOD: dict[str, list[Check]] = {}
_EVERY: list[Check] = []  # "compute.*" checks


def rule(
    id: str,
    methods: tuple[str, ...],
    summary: str,
    source: str,
    answer: str,
    old: str,
    example: tuple[Step, ...],
    check: Check | None = None,
    where: str = "",
) -> Rule:
    if any(r.id == id for r in RULES):
        raise ValueError(f"duplicate rule id {id}")
    if (check is None) == (not where):
        raise ValueError(f"rule {id}: give a check or say where the handler enforces it")
    found = Rule(id, methods, summary, source, answer, old, example, check, where)
    RULES.append(found)
    if check is not None:
        for method in methods:  # one check may serve several rules (each its own example): it runs once
            checks = _EVERY if method == "compute.*" else _BY_METHOD.setdefault(method, [])
            if check not in checks:
                checks.append(check)
    return found


def check(call: Call) -> None:
    """Every catalogue check of the call's method, in catalogue order (the first refusal answers)."""
    if call.method.api == "compute":
        for fn in _EVERY:
            fn(call)
    for fn in _BY_METHOD.get(call.method.id, ()):
        fn(call)


def body(call: Call) -> dict[str, Any]:
    return call.body if isinstance(call.body, dict) else {}


def bad(where: str, value: Any, why: str) -> ApiError:
    """Compute Engine's wording: `Invalid value for field 'resource.mtu': '9000'. <why>`."""
    return invalid(f"Invalid value for field '{where}': '{value}'. {why}")


def table() -> str:
    """The README's catalogue table (a test keeps the README equal to it)."""
    lines = [
        f"{len(RULES)} rules (sandbox/gcp/rules/). Google answers: `op CODE` means the HTTP call answers 200 with a "
        "RUNNING operation that ends DONE with `error.errors[0].code == CODE`.",
        "",
        "| Rule | Methods | What Google does | Answer | Source |",
        "|---|---|---|---|---|",
    ]
    for r in RULES:
        methods = ", ".join(f"`{m}`" for m in r.methods)
        lines.append(f"| `{r.id}` | {methods} | {r.summary} | {r.answer} | [source]({r.source}) |")
    return "\n".join(lines) + "\n"


def load() -> list[Rule]:
    """Import every family (registering its rules) and answer the catalogue."""
    from vmplane.sandbox.gcp.rules import (  # noqa: F401 - importing a family registers its rules
        disks,
        dns_rules,
        groups,
        handled,
        lb,
        network,
        requests,
        secrets,
    )

    return RULES
