"""An `AwsFault` rendered in the service's own error shape, and model violations turned into the fault
AWS answers for them (its code and wording), so boto3 parses each into a `ClientError` as on AWS.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any
from xml.sax.saxutils import escape

from vmplane.sandbox.aws.model import Violation
from vmplane.sandbox.aws.rule import AwsFault

# The code each service answers for a request its model refuses.
# EC2: https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html (MissingParameter,
#   InvalidParameterValue). Query services (IAM, ELBv2, Auto Scaling, STS): ValidationError, as in
#   https://docs.aws.amazon.com/IAM/latest/APIReference/CommonErrors.html. JSON and REST-JSON services:
#   ValidationException (https://docs.aws.amazon.com/acm/latest/APIReference/CommonErrors.html).
#   Route 53: InvalidInput (https://docs.aws.amazon.com/Route53/latest/APIReference/API_ChangeResourceRecordSets.html).
#   S3 is no Coral service: a body its schema refuses is MalformedXML, a header or query value InvalidArgument
#   (https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html).
VALIDATION_CODE = {
    "elbv2": "ValidationError",
    "autoscaling": "ValidationError",
    "iam": "ValidationError",
    "sts": "ValidationError",
    "acm": "ValidationException",
    "ssm": "ValidationException",
    "scheduler": "ValidationException",
    "secretsmanager": "ValidationException",
    "route53": "InvalidInput",
    "s3": "InvalidArgument",
}
_ROUTE53_NS = "https://route53.amazonaws.com/doc/2013-04-01/"


def _shown(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, list):
        return "'[" + ", ".join(str(v) for v in value) + "]'"
    if isinstance(value, bool):
        return f"'{str(value).lower()}'"
    return f"'{value}'"


def validation_fault(service: str, violations: Sequence[Violation], body_member: str | None = None) -> AwsFault:
    """The one fault AWS answers for all of a request's model violations (`body_member`: the input's
    payload member, for S3, which answers for its XML body otherwise than for headers)."""
    if service == "ec2":
        first = violations[0]  # EC2 names one parameter per answer
        missing = next((v for v in violations if v.kind == "required"), None)
        if missing is not None:
            return AwsFault("MissingParameter", f"The request must contain the parameter {missing.wire_path}")
        return AwsFault(
            "InvalidParameterValue",
            f"Value ({first.value}) for parameter {first.wire_path} is invalid. {first.constraint}",
        )
    n = len(violations)
    if service == "s3" and body_member is not None and violations[0].names[:1] == (body_member,):
        return AwsFault(
            "MalformedXML",
            "The XML you provided was not well-formed or did not validate against our published schema "
            f"({violations[0].coral_path}: {violations[0].constraint})",
        )
    details = "; ".join(
        f"Value {_shown(v.value)} at '{v.coral_path}' failed to satisfy constraint: {v.constraint}" for v in violations
    )
    message = f"{n} validation error{'s' if n > 1 else ''} detected: {details}"
    return AwsFault(VALIDATION_CODE.get(service, "ValidationException"), message)


def render(fault: AwsFault, service: str, protocol: str) -> tuple[int, list[tuple[str, str]], bytes]:
    """(status, headers, body) in the protocol's error shape."""
    rid = str(uuid.uuid4())
    code, msg = escape(fault.code), escape(fault.message)
    if protocol == "ec2":
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>'
            f"<Code>{code}</Code><Message>{msg}</Message></Error></Errors><RequestID>{rid}</RequestID></Response>"
        )
        return fault.status, [("Content-Type", "text/xml;charset=UTF-8")], body.encode()
    if protocol in ("json", "rest-json"):
        payload = {"__type": fault.code, "message": fault.message}
        if protocol == "rest-json":
            payload = {"Message": fault.message}
        ctype = "application/x-amz-json-1.1" if protocol == "json" else "application/json"
        headers = [("Content-Type", ctype), ("x-amzn-ErrorType", fault.code), ("x-amzn-RequestId", rid)]
        return fault.status, headers, json.dumps(payload).encode()
    if service == "s3":
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{code}</Code><Message>{msg}</Message><RequestId>{rid}</RequestId></Error>"
        )
        return fault.status, [("Content-Type", "application/xml"), ("x-amz-request-id", rid)], body.encode()
    # query services and Route 53 (rest-xml) share the ErrorResponse shape
    ns = f' xmlns="{_ROUTE53_NS}"' if service == "route53" else ""
    body = (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<ErrorResponse{ns}><Error><Type>Sender</Type>'
        f"<Code>{code}</Code><Message>{msg}</Message></Error><RequestId>{rid}</RequestId></ErrorResponse>"
    )
    return fault.status, [("Content-Type", "text/xml"), ("x-amzn-RequestId", rid)], body.encode()
