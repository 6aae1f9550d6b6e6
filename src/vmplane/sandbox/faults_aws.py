"""The AWS side of a fault profile: a WSGI middleware in front of moto's app (sandbox/faults.py).

It wraps the strict layer from outside (aws/app.build_app's `wrappers`: AWS throttles before it
validates), places each request with the strict layer's parser (aws/request.py), and answers a fault in
the protocol's own error shape (aws/errors.render) before the request goes on, or lets it go on and
remembers what a create made. What it cannot know, it does not fault: an ASG's
launches happen inside moto (no request passes here), so capacity is injected on RunInstances only.
"""

from __future__ import annotations

import io
import json
import re
import urllib.parse
from collections.abc import Callable, Iterable
from typing import Any

from vmplane.sandbox.aws import errors, request
from vmplane.sandbox.aws.rule import AwsFault
from vmplane.sandbox.faults import AWS_KINDS, NO_FAULTS_AGENT, Injector

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
Answer = tuple[str, list[tuple[str, str]], bytes]
# Ids a create answers with, by prefix (the kinds of faults.AWS_KINDS).
_ID_TAGS = "vpcId|subnetId|groupId|internetGatewayId|routeTableId|natGatewayId|allocationId|instanceId|launchTemplateId"
_ID = re.compile(rf"<(?:{_ID_TAGS})>([a-z]+-[0-9a-f]+)<")
_PREFIX = {
    "vpc": "vpc",
    "subnet": "subnet",
    "sg": "security-group",
    "igw": "internet-gateway",
    "rtb": "route-table",
    "nat": "nat-gateway",
    "eipalloc": "elastic-ip",
    "i": "instance",
    "lt": "launch-template",
}
# AWS's throttling codes per protocol family (botocore's standard retry mode treats each as throttling).
# https://docs.aws.amazon.com/AWSEC2/latest/APIReference/throttling.html (EC2: RequestLimitExceeded, 503)
# https://docs.aws.amazon.com/IAM/latest/APIReference/CommonErrors.html (query services: Throttling, 400)
# https://docs.aws.amazon.com/systems-manager/latest/APIReference/CommonErrors.html (json: ThrottlingException)
# AWS's refusals of an instance profile EC2 does not see yet, quoted in
# https://github.com/awslabs/aws-simple-ec2-cli/issues/110 (RunInstances) and
# https://github.com/eksctl-io/eksctl/issues/8039 (CreateAutoScalingGroup, seconds after CreateInstanceProfile).
_IAM_MESSAGE = "Value ({}) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name"
_PROFILE_USERS = {
    "RunInstances": ("InvalidParameterValue", _IAM_MESSAGE),
    "CreateAutoScalingGroup": ("ValidationError", "You must use a valid fully-formed launch template. " + _IAM_MESSAGE),
}


def identify(environ: dict[str, Any], body: bytes) -> tuple[str, str, str, dict[str, str]]:
    """(botocore service, operation, protocol, flat form params) of one request, through the strict
    layer's parser (aws/request.py); ("", "", "", {}) for what it cannot place (nothing is faulted then)."""
    try:
        parsed = request.parse(environ, body)
    except Exception:  # the strict layer passes such a request to moto unchecked: so does this one
        parsed = None
    if parsed is None:
        return "", "", "", {}
    params: dict[str, str] = {}
    if "form-urlencoded" in environ.get("CONTENT_TYPE", ""):  # EC2 and query services: flat keys
        params = {k: v[-1] for k, v in urllib.parse.parse_qs(body.decode(errors="replace")).items()}
    return parsed.request.service, parsed.request.operation, parsed.protocol, params


def _error(service: str, protocol: str, code: str, message: str, status: int) -> Answer:
    out_status, headers, data = errors.render(AwsFault(code, message, status), service, protocol)
    return f"{out_status} Error", headers, data


def _throttle_code(protocol: str) -> tuple[str, int]:
    if protocol == "ec2":
        return "RequestLimitExceeded", 503
    if protocol in ("json", "rest-json"):
        return "ThrottlingException", 400
    return "Throttling", 400


class AwsFaults:
    """`AwsFaults(moto_app, injector)` is itself a WSGI app."""

    def __init__(self, app: WsgiApp, injector: Injector) -> None:
        self.app = app
        self.faults = injector
        self._subnet_az: dict[str, str] = {}
        self._template_type: dict[str, str] = {}  # launch template id -> instance type
        self._template_profile: dict[str, str] = {}  # launch template id and name -> instance profile name

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/_sandbox/faults":
            data = json.dumps(self.faults.report()).encode()
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
            return [data]
        never = path.startswith(("/moto-api", "/_sandbox", "/_vmplane"))  # control paths
        if never or NO_FAULTS_AGENT in environ.get("HTTP_USER_AGENT", ""):
            return self.app(environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(body)
        service, operation, protocol, params = identify(environ, body)
        fault = self._before(service, operation, protocol, params) if service else None
        if fault is not None:
            status, headers, data = fault
            start_response(status, [*headers, ("Content-Length", str(len(data)))])
            return [data]
        captured: dict[str, Any] = {}

        def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            captured["status"] = status
            return start_response(status, headers, exc_info)

        out = b"".join(self.app(environ, capture))
        if str(captured.get("status", "")).startswith("200"):
            self._after(service, operation, params, out)
        return [out]

    def _before(self, service: str, operation: str, protocol: str, params: dict[str, str]) -> Answer | None:
        f = self.faults
        if f.throttled("aws"):
            code, status = _throttle_code(protocol)
            f.record("aws", "throttle", operation, code)
            return _error(service, protocol, code, "Rate exceeded", status)
        if operation in _PROFILE_USERS:
            name = self._profile_of(params)
            if name and f.profile_unseen(name):
                code, message = _PROFILE_USERS[operation]
                f.record("aws", "iamPropagation", operation, code, name)
                return _error(service, protocol, code, message.format(name), 400)
        if service == "ec2":
            # Any request naming a young id (a describe, a tag, a create under a new VPC) is refused, as
            # EC2 refuses it; a filter naming it only matches nothing, so filters are left alone.
            for key, value in params.items():
                kind = None if key.startswith("Filter.") else f.invisible(value)
                if kind is not None:
                    code = AWS_KINDS[kind]
                    f.record("aws", "visibility", operation, code, value)
                    return _error(service, protocol, code, f"The {kind} ID '{value}' does not exist", 400)
        if operation == "RunInstances" and f.out_of_capacity("aws"):
            az = self._subnet_az.get(params.get("SubnetId", ""), "")
            kind = params.get("InstanceType") or self._template_type.get(
                params.get("LaunchTemplate.LaunchTemplateId", "")
            )
            kind = kind or "the requested instance type"
            f.record("aws", "capacity", operation, "InsufficientInstanceCapacity", az)
            # AWS's own sentence (the 500 answer quoted in https://github.com/galaxyproject/cloudman/issues/64).
            others = ", ".join(f"{az[:-1]}{c}" for c in "abc" if f"{az[:-1]}{c}" != az) if az else "another one"
            message = (
                f"We currently do not have sufficient {kind} capacity in the Availability Zone you requested ({az}). "
                f"Our system will be working on provisioning additional capacity. You can currently get {kind} "
                f"capacity by not specifying an Availability Zone in your request or choosing {others}."
            )
            return _error(service, protocol, "InsufficientInstanceCapacity", message, 500)
        return None

    def _profile_of(self, params: dict[str, str]) -> str | None:
        """The instance profile a request names, itself or through its launch template."""
        for key, value in params.items():
            if key.endswith("IamInstanceProfile.Name"):
                return value
            if key.endswith("IamInstanceProfile.Arn"):
                return value.rsplit("/", 1)[-1]
        for key, value in params.items():
            if key.endswith(("LaunchTemplateId", "LaunchTemplateName")) and value in self._template_profile:
                return self._template_profile[value]
        return None

    def _after(self, service: str, operation: str, params: dict[str, str], out: bytes) -> None:
        if service == "iam" and operation == "CreateInstanceProfile":
            self.faults.profile_created(params.get("InstanceProfileName", ""))
        if service != "ec2" or not operation.startswith(("Create", "Run", "Allocate")):
            return
        text = out.decode(errors="replace")
        ids = _ID.findall(text)
        if operation == "CreateSubnet" and ids:
            az = re.search(r"<availabilityZone>([^<]+)<", text)
            if az:
                self._subnet_az[ids[0]] = az.group(1)
        if operation in ("CreateLaunchTemplate", "CreateLaunchTemplateVersion"):
            lt = ids[0] if ids else params.get("LaunchTemplateId", "")
            self._template_type[lt] = params.get("LaunchTemplateData.InstanceType", "")
            profile = self._profile_of(params)
            if profile:
                self._template_profile[lt] = profile
                self._template_profile[params.get("LaunchTemplateName", lt)] = profile
        made = {"RunInstances": "instance"}.get(operation)
        for ident in dict.fromkeys(ids):
            kind = _PREFIX.get(ident.split("-", 1)[0])
            # An answer names what it refers to as well (CreateSubnet names its VPC): only the new kind counts.
            if kind is not None and (made is None or kind == made) and _makes(operation, kind):
                self.faults.created(kind, ident)


def _makes(operation: str, kind: str) -> bool:
    """Whether `operation` creates a resource of `kind` (CreateRoute answers no new id worth hiding)."""
    noun = operation.removeprefix("Create").removeprefix("Allocate").lower()
    return {
        "vpc": noun == "vpc",
        "subnet": noun == "subnet",
        "security-group": noun == "securitygroup",
        "internet-gateway": noun == "internetgateway",
        "route-table": noun == "routetable",
        "nat-gateway": noun == "natgateway",
        "elastic-ip": noun == "address",
        "instance": operation == "RunInstances",
        "launch-template": noun == "launchtemplate",
    }[kind]
