"""The shape of one AWS fidelity rule: what AWS refuses (or does) that moto does not, with its source.

The strict layer parses each request into an `AwsRequest` (the botocore-shaped input, as boto3 was
given it), checks it against botocore's service model, then runs every catalogue rule registered for
its operation before moto sees it. A rule reads moto's state (moto.backends.get_backend) and answers
an `AwsFault` in AWS's own code and wording, or None. `example` sets up what the rule needs with real
boto3 clients and returns the offending request, so one example is tested in-process against the rule
and through the sandbox against the wire (where the old, lenient sandbox accepted it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class AwsRequest:
    service: str  # botocore's service name: "ec2", "elbv2", "iam", "acm", "route53", ...
    operation: str  # the operation's name in the model: "CreateVpc"
    # The input as boto3 was given it (member names of the input shape). Read from the wire: numbers and
    # booleans typed by the model; timestamps a datetime (query, XML) or epoch seconds (JSON); a value that
    # does not parse stays text (the model check refuses it before any rule sees it).
    params: Mapping[str, Any]
    region: str = "us-east-1"
    account: str = "123456789012"


class AwsFault(Exception):
    """An answer in AWS's error shape (the strict layer renders it for the service's protocol)."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


class Clients(Protocol):
    """boto3 clients of one account and region (moto in-process, or the sandbox's endpoint)."""

    def __call__(self, service: str) -> Any: ...


@dataclass(frozen=True)
class Rule:
    id: str  # "<service>.<what>": "ec2.delete-subnet-with-instances"
    service: str
    operations: tuple[str, ...]
    summary: str  # one line: what AWS refuses or does (the README's list)
    source: str  # a documentation page or an issue showing the real answer
    check: Callable[[AwsRequest], AwsFault | None]
    code: str  # the error code AWS answers (what `example`'s request must get)
    example: Callable[[Clients], AwsRequest] | None = field(default=None, compare=False)
