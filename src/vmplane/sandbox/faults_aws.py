"""The AWS side of a fault profile: a WSGI middleware in front of moto's app (sandbox/faults.py).

It reads each request's service (the SigV4 credential scope) and operation (`Action=` or
`X-Amz-Target`), and answers a fault in the protocol's own error shape before moto sees the request, or
lets moto answer and remembers what a create made. What it cannot know, it does not fault: an ASG's
launches happen inside moto (no request passes here), so capacity is injected on RunInstances only.
"""

from __future__ import annotations

import io
import json
import re
import urllib.parse
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.threaded_moto_server import ThreadedMotoServer
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server

from vmplane.sandbox.faults import AWS_KINDS, Injector

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

_SCOPE = re.compile(r"Credential=[^/]+/\d{8}/[^/]+/([^/]+)/aws4_request")
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


def identify(environ: dict[str, Any], body: bytes) -> tuple[str, str, dict[str, str]]:
    """(service, operation, flat params) of one request; "" where the request does not say."""
    scope = _SCOPE.search(environ.get("HTTP_AUTHORIZATION", ""))
    service = scope.group(1) if scope else ""
    params = {k: v[-1] for k, v in urllib.parse.parse_qs(environ.get("QUERY_STRING", "")).items()}
    if "form-urlencoded" in environ.get("CONTENT_TYPE", ""):
        params.update({k: v[-1] for k, v in urllib.parse.parse_qs(body.decode(errors="replace")).items()})
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    operation = params.get("Action") or target.rpartition(".")[2]
    return service, operation, params


def _error(service: str, code: str, message: str, status: int) -> tuple[str, list[tuple[str, str]], bytes]:
    request_id = str(uuid.uuid4())
    if service == "ec2":
        body = (
            f'<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>{code}</Code>'
            f"<Message>{message}</Message></Error></Errors><RequestID>{request_id}</RequestID></Response>"
        )
        return f"{status} Error", [("Content-Type", "text/xml")], body.encode()
    if service in ("ssm", "acm", "scheduler", "logs"):
        data = json.dumps({"__type": code, "message": message}).encode()
        headers = [("Content-Type", "application/x-amz-json-1.1"), ("x-amzn-ErrorType", code)]
        return f"{status} Error", headers, data
    body = (
        f"<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error>"
        f"<RequestId>{request_id}</RequestId></ErrorResponse>"
    )
    return f"{status} Error", [("Content-Type", "text/xml")], body.encode()


def _throttle_code(service: str) -> tuple[str, int]:
    if service == "ec2":
        return "RequestLimitExceeded", 503
    if service in ("ssm", "acm", "scheduler", "logs"):
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
        if path.startswith(("/moto-api", "/_sandbox")):  # control paths: never faulted
            return self.app(environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(body)
        service, operation, params = identify(environ, body)
        fault = self._before(service, operation, params)
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

    def _before(
        self, service: str, operation: str, params: dict[str, str]
    ) -> tuple[str, list[tuple[str, str]], bytes] | None:
        f = self.faults
        if f.throttled("aws"):
            code, status = _throttle_code(service)
            f.record("aws", "throttle", operation or service, code)
            return _error(service, code, "Rate exceeded", status)
        if operation in _PROFILE_USERS:
            name = self._profile_of(params)
            if name and f.profile_unseen(name):
                code, message = _PROFILE_USERS[operation]
                f.record("aws", "iamPropagation", operation, code, name)
                return _error(service, code, message.format(name), 400)
        if service == "ec2":
            # Any request naming a young id (a describe, a tag, a create under a new VPC) is refused, as
            # EC2 refuses it; a filter naming it only matches nothing, so filters are left alone.
            for key, value in params.items():
                kind = None if key.startswith("Filter.") else f.invisible(value)
                if kind is not None:
                    code = AWS_KINDS[kind]
                    f.record("aws", "visibility", operation, code, value)
                    return _error(service, code, f"The {kind} ID '{value}' does not exist", 400)
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
            return _error(service, "InsufficientInstanceCapacity", message, 500)
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


class FaultyMotoServer(ThreadedMotoServer):
    """moto's threaded server with the middleware in front of its app (the same app, handler and threads)."""

    def __init__(self, injector: Injector, **kw: Any) -> None:
        super().__init__(**kw)
        self._injector = injector

    def _server_entry(self) -> None:
        app = AwsFaults(DomainDispatcherApplication(create_backend_app), self._injector)
        self._server = make_server(self._ip_address, self._port, app, True, request_handler=MotoRequestHandler)
        self._server_ready_event.set()
        self._server.serve_forever()
