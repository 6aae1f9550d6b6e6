"""S3 bucket names as AWS's naming rules state them (moto checks the length only), and SSM SendCommand
answering only for instances it knows that are running (moto reports Success for any id)."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from vmplane.sandbox.aws.rule import AwsFault, AwsRequest, Clients, Rule
from vmplane.sandbox.aws.rules._common import backend, fault, instance, instance_state, p, request, subnet, vpc

_NAMING = "https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html"
_SEND = "https://docs.aws.amazon.com/systems-manager/latest/APIReference/API_SendCommand.html"
_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")


def _name(req: AwsRequest) -> str:
    return str(p(req, "Bucket", ""))


def _invalid(req: AwsRequest) -> AwsFault:
    return fault("InvalidBucketName", "The specified bucket is not valid.")


def _dotdot(req: AwsRequest) -> AwsFault | None:
    return _invalid(req) if ".." in _name(req) else None


def _characters(req: AwsRequest) -> AwsFault | None:
    return None if re.fullmatch(r"[a-z0-9.-]*", _name(req)) else _invalid(req)


def _edges(req: AwsRequest) -> AwsFault | None:
    name = _name(req)
    return None if name[:1].isalnum() and name[-1:].isalnum() else _invalid(req)


def _ip_like(req: AwsRequest) -> AwsFault | None:
    try:
        ipaddress.IPv4Address(_name(req))
    except ValueError:
        return None
    return _invalid(req)


def _prefix(req: AwsRequest) -> AwsFault | None:
    return _invalid(req) if _name(req).startswith(_PREFIXES) else None


def _suffix(req: AwsRequest) -> AwsFault | None:
    return _invalid(req) if _name(req).endswith(_SUFFIXES) else None


def _bucket(name: str) -> Any:
    return lambda clients: request("s3", "CreateBucket", Bucket=name)


def _instance_ids(req: AwsRequest) -> list[str]:
    return [str(i) for i in p(req, "InstanceIds") or ()]


def _unknown(req: AwsRequest) -> AwsFault | None:
    for iid in _instance_ids(req):
        if instance_state(req, iid) in (None, "terminated", "shutting-down"):
            return fault("InvalidInstanceId", f"Instances [[{iid}]] not in a valid state for account {req.account}")
    return None


def _not_running(req: AwsRequest) -> AwsFault | None:
    # A stopped instance's agent is not online: AWS answers InvalidInstanceId ("SSM Agent isn't running").
    for iid in _instance_ids(req):
        if instance_state(req, iid) in ("stopped", "stopping"):
            return fault("InvalidInstanceId", f"Instances [[{iid}]] not in a valid state for account {req.account}")
    return None


def _unknown_document(req: AwsRequest) -> AwsFault | None:
    name = str(p(req, "DocumentName", ""))
    ssm = backend("ssm", req)
    # moto holds no AWS-owned documents (AWS-RunShellScript, ...): those are taken to exist, the
    # account's own are looked up (the sandbox cannot know AWS's full list).
    owned_by_aws = name.startswith(("AWS-", "AWSEC2-", "AWSSupport-", "AmazonCloudWatch-", "arn:"))
    if name and not owned_by_aws and ssm._documents.get(name) is None:
        return fault("InvalidDocument", f"Document with name {name} does not exist.")
    return None


def _send(clients: Clients, iid: str, document: str = "AWS-RunShellScript") -> AwsRequest:
    return request("ssm", "SendCommand", InstanceIds=[iid], DocumentName=document, Parameters={"commands": ["true"]})


def _ex_unknown(clients: Clients) -> AwsRequest:
    return _send(clients, "i-0123456789abcdef0")


def _ex_stopped(clients: Clients) -> AwsRequest:
    iid = instance(clients, subnet(clients, vpc(clients), "10.0.1.0/24"))
    clients("ec2").stop_instances(InstanceIds=[iid])
    return _send(clients, iid)


def _ex_terminated(clients: Clients) -> AwsRequest:
    iid = instance(clients, subnet(clients, vpc(clients), "10.0.1.0/24"))
    clients("ec2").terminate_instances(InstanceIds=[iid])
    return _send(clients, iid)


def _ex_document(clients: Clients) -> AwsRequest:
    iid = instance(clients, subnet(clients, vpc(clients), "10.0.1.0/24"))
    return _send(clients, iid, "Vmplane-NoSuchDocument")


def _s3(rid: str, summary: str, check: Any, name: str) -> Rule:
    return Rule(f"s3.{rid}", "s3", ("CreateBucket",), summary, _NAMING, check, "InvalidBucketName", _bucket(name))


def _ssm(rid: str, summary: str, check: Any, code: str, example: Any) -> Rule:
    return Rule(f"ssm.{rid}", "ssm", ("SendCommand",), summary, _SEND, check, code, example)


RULES = (
    _s3("bucket-name-adjacent-periods", "A bucket name may not hold two adjacent periods", _dotdot, "state..vmplane"),
    _s3("bucket-name-characters", "A bucket name uses lowercase letters, digits, periods and hyphens only",
        _characters, "State_Vmplane"),
    _s3("bucket-name-edges", "A bucket name begins and ends with a letter or digit", _edges, "vmplane-state-"),
    _s3("bucket-name-ip-address", "A bucket name may not look like an IP address", _ip_like, "192.168.5.4"),
    _s3("bucket-name-reserved-prefix", "A bucket name may not begin with xn--, sthree- or amzn-s3-demo-", _prefix,
        "sthree-vmplane-state"),
    _s3("bucket-name-reserved-suffix", "A bucket name may not end with -s3alias, --ol-s3, .mrap, --x-s3 or --table-s3",
        _suffix, "vmplane-state-s3alias"),
    _ssm("send-command-unknown-instance", "SendCommand to an instance the account does not have is refused", _unknown,
         "InvalidInstanceId", _ex_unknown),
    _ssm("send-command-terminated-instance", "SendCommand to a terminated instance is refused", _unknown,
         "InvalidInstanceId", _ex_terminated),
    _ssm("send-command-stopped-instance", "SendCommand to a stopped instance (its agent is not running) is refused",
         _not_running, "InvalidInstanceId", _ex_stopped),
    _ssm("send-command-unknown-document", "SendCommand with a document that does not exist is refused",
         _unknown_document, "InvalidDocument", _ex_document),
)  # fmt: skip
