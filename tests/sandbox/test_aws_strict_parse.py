"""The strict layer's parts without a server: requests read back from what botocore's own serializers
put on the wire (each protocol), the model checks' paths, AWS's error shapes parsed by botocore into the
right code, and botocore's Java patterns translated to Python.
"""

from __future__ import annotations

import datetime as dt
import io
import urllib.parse
from typing import Any

import pytest
from botocore.awsrequest import HeadersDict, prepare_request_dict
from botocore.parsers import create_parser
from botocore.serialize import create_serializer

from vmplane.sandbox.aws import errors, model, patterns, request
from vmplane.sandbox.aws.rule import AwsFault

SCOPE = "AWS4-HMAC-SHA256 Credential=testing/20261203/us-east-1/{}/aws4_request, SignedHeaders=host, Signature=0"


def _environ(service: str, operation: str, params: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    """The WSGI environ werkzeug would build for botocore's serialized request."""
    svc = request.service_model(service)
    op = svc.operation_model(operation)
    wire = create_serializer(svc.protocol, include_validation=False).serialize_to_request(params, op)
    prepare_request_dict(wire, endpoint_url="http://127.0.0.1:5000")
    url = urllib.parse.urlsplit(wire["url"])
    body = wire["body"]
    data = (
        body
        if isinstance(body, bytes)
        else urllib.parse.urlencode(body).encode()
        if isinstance(body, dict)
        else str(body).encode()
    )
    headers = {k.upper().replace("-", "_"): str(v) for k, v in wire["headers"].items()}
    environ: dict[str, Any] = {
        f"HTTP_{k}": v for k, v in headers.items() if k not in ("CONTENT_TYPE", "CONTENT_LENGTH")
    }
    environ |= {
        "REQUEST_METHOD": wire["method"],
        "PATH_INFO": urllib.parse.unquote(url.path),
        "RAW_URI": url.path + (f"?{url.query}" if url.query else ""),
        "QUERY_STRING": url.query,
        "CONTENT_TYPE": headers.get(
            "CONTENT_TYPE", "application/x-www-form-urlencoded" if isinstance(body, dict) else ""
        ),
        "CONTENT_LENGTH": str(len(data)),
        "HTTP_AUTHORIZATION": SCOPE.format(svc.signing_name),
        "wsgi.input": io.BytesIO(data),
    }
    return environ, data


ROUND_TRIPS: list[tuple[str, str, dict[str, Any]]] = [
    (
        "ec2",
        "RunInstances",
        {
            "ImageId": "ami-1",
            "MinCount": 1,
            "MaxCount": 2,
            "SecurityGroupIds": ["sg-1", "sg-2"],
            "TagSpecifications": [
                {"ResourceType": "instance", "Tags": [{"Key": "a", "Value": "b"}, {"Key": "c", "Value": ""}]}
            ],
            "BlockDeviceMappings": [
                {"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 10, "DeleteOnTermination": True}}
            ],
        },
    ),
    ("ec2", "DescribeVpcs", {"Filters": [{"Name": "tag:x", "Values": ["1", "2"]}], "VpcIds": ["vpc-1"]}),
    ("elbv2", "AddTags", {"ResourceArns": ["arn:aws:x"], "Tags": [{"Key": "k", "Value": "v"}]}),
    (
        "autoscaling",
        "CreateAutoScalingGroup",
        {
            "AutoScalingGroupName": "g",
            "MinSize": 0,
            "MaxSize": 2,
            "LaunchTemplate": {"LaunchTemplateName": "lt1", "Version": "$Latest"},
            "Tags": [{"Key": "k", "Value": "v", "PropagateAtLaunch": True}],
        },
    ),
    ("iam", "CreateRole", {"RoleName": "r", "AssumeRolePolicyDocument": "{}", "Tags": [{"Key": "k", "Value": "v"}]}),
    (
        "acm",
        "RequestCertificate",
        {"DomainName": "a.example", "SubjectAlternativeNames": ["b.example"], "ValidationMethod": "DNS"},
    ),
    (
        "route53",
        "ChangeResourceRecordSets",
        {
            "HostedZoneId": "Z1",
            "ChangeBatch": {
                "Changes": [
                    {
                        "Action": "UPSERT",
                        "ResourceRecordSet": {
                            "Name": "a.example",
                            "Type": "A",
                            "TTL": 60,
                            "ResourceRecords": [{"Value": "192.0.2.1"}],
                        },
                    }
                ]
            },
        },
    ),
    ("route53", "ListResourceRecordSets", {"HostedZoneId": "Z1", "StartRecordName": "a", "MaxItems": "5"}),
    ("s3", "PutBucketTagging", {"Bucket": "b", "Tagging": {"TagSet": [{"Key": "k", "Value": "v"}]}}),
    ("s3", "PutObject", {"Bucket": "b", "Key": "a/b c+d", "ContentType": "text/plain", "Metadata": {"owner": "me"}}),
    ("s3", "CopyObject", {"Bucket": "b", "Key": "k", "CopySource": "b/a"}),
    ("s3", "ListObjectsV2", {"Bucket": "b", "Prefix": "p/", "MaxKeys": 5}),
    (
        "scheduler",
        "CreateSchedule",
        {
            "Name": "s",
            "ScheduleExpression": "cron(0 8 * * ? *)",
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "Target": {"Arn": "arn:aws:x", "RoleArn": "arn:aws:iam::123456789012:role/r", "Input": "{}"},
            "StartDate": dt.datetime(2026, 12, 3, tzinfo=dt.UTC),
        },
    ),
]


@pytest.mark.parametrize(("service", "operation", "params"), ROUND_TRIPS, ids=[f"{s}.{o}" for s, o, _ in ROUND_TRIPS])
def test_parse_reads_back_what_botocore_serialized(service: str, operation: str, params: dict[str, Any]) -> None:
    environ, body = _environ(service, operation, params)
    parsed = request.parse(environ, body)
    assert parsed is not None
    got = dict(parsed.request.params)
    if service == "scheduler":
        got["StartDate"] = dt.datetime.fromtimestamp(got["StartDate"], dt.UTC)  # JSON: epoch seconds
    got.pop("ClientToken", None)  # botocore fills idempotency tokens in
    if "ContentLength" in got and "ContentLength" not in params:
        assert got.pop("ContentLength") == len(body)  # the HTTP request's own header, where the model names it
    assert (parsed.request.service, parsed.request.operation, got) == (service, operation, params)
    assert model.check(parsed.operation.input_shape, parsed.request.params) == []


def test_unsigned_and_foreign_requests_are_not_placed() -> None:
    environ, body = _environ("ec2", "DescribeVpcs", {})
    assert request.parse({**environ, "HTTP_AUTHORIZATION": ""}, body) is None
    sqs = {**environ, "HTTP_AUTHORIZATION": SCOPE.format("sqs")}
    assert request.parse(sqs, body) is None
    unknown = b"Action=NoSuchAction&Version=2016-11-15"
    assert request.parse({**environ, "CONTENT_LENGTH": str(len(unknown))}, unknown) is None


def test_violation_paths_name_the_member_as_aws_does() -> None:
    op = request.service_model("ec2").operation_model("RunInstances")
    params = {
        "MinCount": 1,
        "MaxCount": "two",
        "TagSpecifications": [{"ResourceType": "instance"}, {"ResourceType": "nope", "Tags": [{"Key": "k"}]}],
    }
    found = [(v.kind, v.coral_path, v.wire_path) for v in model.check(op.input_shape, params)]
    assert found == [
        ("type", "maxCount", "MaxCount"),
        ("enum", "tagSpecifications.2.member.resourceType", "TagSpecification.2.ResourceType"),
    ]


def _parsed_error(service: str, operation: str, fault: AwsFault) -> tuple[str, str, int]:
    svc = request.service_model(service)
    status, headers, body = errors.render(fault, service, svc.protocol)
    response = {"status_code": status, "headers": HeadersDict(headers), "body": body}
    shape = svc.operation_model(operation).output_shape
    parsed = create_parser(svc.protocol).parse(response, shape)
    return parsed["Error"]["Code"], parsed["Error"]["Message"], parsed["ResponseMetadata"]["HTTPStatusCode"]


@pytest.mark.parametrize(
    ("service", "operation"),
    [
        ("ec2", "CreateVpc"),
        ("elbv2", "CreateTargetGroup"),
        ("iam", "CreateRole"),
        ("acm", "RequestCertificate"),
        ("route53", "CreateHostedZone"),
        ("s3", "PutBucketTagging"),
        ("scheduler", "CreateSchedule"),
    ],
)
def test_botocore_parses_each_error_shape(service: str, operation: str) -> None:
    fault = AwsFault("SomeCode", "a <message> & more", status=409)
    assert _parsed_error(service, operation, fault) == ("SomeCode", "a <message> & more", 409)


SERVICES_PATTERNS = sorted(
    {
        str(shape.metadata["pattern"])
        for name in request.SERVICES
        for shape in (request.service_model(name).shape_for(s) for s in request.service_model(name).shape_names)
        if "pattern" in shape.metadata
    }
)


def test_every_pattern_of_the_checked_services_compiles_or_is_listed() -> None:
    skipped = [p for p in SERVICES_PATTERNS if patterns.compiled(p) is None]
    assert len(SERVICES_PATTERNS) > 150
    assert skipped == [], skipped  # none today; a new botocore may add one Python cannot express


@pytest.mark.parametrize(
    ("java", "accepts", "refuses"),
    [
        (r"[\p{L}\p{Z}\p{N}_.:/=+\-@]*", ["Équipe 7", "a_b.c:d/e=f+g-h@i", "数据"], ["a#b", "a\tb", "a*"]),
        (
            r"[\u0020-\uD7FF\uE000-\uFFFD\uD800\uDC00-\uDBFF\uDFFF\r\n\t]*",
            ["plain text", "emoji \U0001f600"],
            ["bell \x07"],
        ),
        (
            r"^arn:aws[a-z0-9-]*:iam::\d{12}:role\/[\w-\/.@+=,]{1,1017}$",
            ["arn:aws:iam::123456789012:role/a-b/c"],
            ["arn:aws:iam::1:role/a"],
        ),
        (r"\p{ASCII}+", ["abc~"], ["é"]),
        (r"[^\p{N}]+", ["abc"], ["a1"]),
    ],
)
def test_java_patterns_mean_in_python_what_they_mean_in_java(java: str, accepts: list[str], refuses: list[str]) -> None:
    regex = patterns.compiled(java)
    assert regex is not None
    assert [bool(regex.fullmatch(v)) for v in accepts + refuses] == [True] * len(accepts) + [False] * len(refuses)


def test_patterns_python_cannot_express_are_skipped_and_listed() -> None:
    for java in (r"[a-z&&[^aeiou]]+", r"[a-z[0-9]]+"):
        assert patterns.compiled(java) is None
        assert java in patterns.skipped()
