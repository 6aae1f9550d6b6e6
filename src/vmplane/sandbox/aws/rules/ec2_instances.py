"""EC2 instances: what a state forbids (changing a running instance's type or user data, starting or
stopping a terminated one), user data's 16 KB, an unknown instance profile, and a subnet's CIDR size
(/16 to /28; moto checks a VPC's itself)."""

from __future__ import annotations

import base64
import contextlib
import ipaddress
from functools import partial
from typing import Any

from vmplane.sandbox.aws.rule import AwsFault, AwsRequest, Clients
from vmplane.sandbox.aws.rules._common import (
    EC2_API,
    EC2_ERRORS,
    backend,
    ec2,
    fault,
    instance,
    instance_state,
    make_rule,
    p,
    request,
    subnet,
    vpc,
)

_USER_DATA = "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/user-data.html"
_SIZING = "https://docs.aws.amazon.com/vpc/latest/userguide/vpc-cidr-blocks.html"


def _instance(req: AwsRequest, iid: str) -> Any:
    for reservation in ec2(req).reservations.values():
        for inst in reservation.instances:
            if inst.id == iid:
                return inst
    return None


def _state_error(iid: str, state: str, what: str) -> AwsFault:
    return fault("IncorrectInstanceState", f"The instance '{iid}' is not in a state from which it can be {what}.")


def _modify_running(req: AwsRequest) -> AwsFault | None:
    iid = str(p(req, "InstanceId", ""))
    touches = any(p(req, k) is not None for k in ("InstanceType", "UserData")) or p(req, "Attribute") in (
        "instanceType",
        "userData",
    )
    if touches and instance_state(req, iid) in ("running", "pending", "stopping"):
        return fault("IncorrectInstanceState", f"The instance '{iid}' is not in the 'stopped' state.")
    return None


def _ids(req: AwsRequest) -> list[str]:
    return [str(i) for i in p(req, "InstanceIds") or ()]


def _terminated(what: str) -> Any:
    def check(req: AwsRequest) -> AwsFault | None:
        for iid in _ids(req):
            if instance_state(req, iid) in ("terminated", "shutting-down"):
                return _state_error(iid, "terminated", what)
        return None

    return check


def _user_data(req: AwsRequest) -> AwsFault | None:
    data = p(req, "UserData")
    if data is None:
        return None
    raw = data if isinstance(data, bytes) else str(data).encode()
    # boto3 base64-encodes RunInstances' UserData; the limit is on the data before encoding.
    with contextlib.suppress(ValueError):
        raw = base64.b64decode(raw, validate=True)
    if len(raw) > 16384:
        return fault("InvalidParameterValue", "User data is limited to 16384 bytes")
    return None


def _unknown_profile(req: AwsRequest) -> AwsFault | None:
    spec = p(req, "IamInstanceProfile") or {}
    name, arn = spec.get("Name"), spec.get("Arn")
    profiles = backend("iam", req).instance_profiles.values()
    if name and not any(i.name == name for i in profiles):
        return fault(
            "InvalidParameterValue",
            f"Value ({name}) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name",
        )
    if arn and not any(i.arn == arn for i in profiles):
        return fault("InvalidParameterValue", f"Value ({arn}) for parameter iamInstanceProfile.arn is invalid.")
    return None


def _cidr(code: str) -> Any:
    def check(req: AwsRequest) -> AwsFault | None:
        block = p(req, "CidrBlock")
        if block and not 16 <= ipaddress.ip_network(str(block), strict=False).prefixlen <= 28:
            return fault(code, f"The CIDR '{block}' is invalid.")
        return None

    return check


def _running(clients: Clients) -> str:
    return instance(clients, subnet(clients, vpc(clients), "10.0.1.0/24"))


def _ex_modify_type(clients: Clients) -> AwsRequest:
    return request("ec2", "ModifyInstanceAttribute", InstanceId=_running(clients), InstanceType={"Value": "t3.large"})


def _ex_modify_user_data(clients: Clients) -> AwsRequest:
    return request("ec2", "ModifyInstanceAttribute", InstanceId=_running(clients), UserData={"Value": b"#!/bin/sh\n"})


def _gone(clients: Clients) -> str:
    iid = _running(clients)
    clients("ec2").terminate_instances(InstanceIds=[iid])
    return iid


def _ex_user_data(clients: Clients) -> AwsRequest:
    return request(
        "ec2", "RunInstances", ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="t3.micro",
        SubnetId=subnet(clients, vpc(clients), "10.0.1.0/24"), UserData="#" * 16385,
    )  # fmt: skip


def _ex_unknown_profile(clients: Clients) -> AwsRequest:
    return request(
        "ec2", "RunInstances", ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="t3.micro",
        SubnetId=subnet(clients, vpc(clients), "10.0.1.0/24"), IamInstanceProfile={"Name": "vmplane-missing"},
    )  # fmt: skip


_rule = partial(make_rule, "ec2")


_MODIFY = ("ModifyInstanceAttribute",)
RULES = (
    _rule("modify-type-while-running", _MODIFY, "An instance's type is changed only while it is stopped",
          EC2_API.format("ModifyInstanceAttribute"), _modify_running, "IncorrectInstanceState", _ex_modify_type),
    _rule("modify-user-data-while-running", _MODIFY, "An instance's user data is changed only while it is stopped",
          EC2_API.format("ModifyInstanceAttribute"), _modify_running, "IncorrectInstanceState", _ex_modify_user_data),
    _rule("start-terminated", ("StartInstances",), "A terminated instance cannot be started", EC2_ERRORS,
          _terminated("started"), "IncorrectInstanceState",
          lambda c: request("ec2", "StartInstances", InstanceIds=[_gone(c)])),
    _rule("stop-terminated", ("StopInstances",), "A terminated instance cannot be stopped", EC2_ERRORS,
          _terminated("stopped"), "IncorrectInstanceState",
          lambda c: request("ec2", "StopInstances", InstanceIds=[_gone(c)])),
    _rule("reboot-terminated", ("RebootInstances",), "A terminated instance cannot be rebooted", EC2_ERRORS,
          _terminated("rebooted"), "IncorrectInstanceState",
          lambda c: request("ec2", "RebootInstances", InstanceIds=[_gone(c)])),
    _rule("user-data-16k", ("RunInstances",), "User data is at most 16 KB before base64 encoding", _USER_DATA,
          _user_data, "InvalidParameterValue", _ex_user_data),
    _rule("unknown-instance-profile", ("RunInstances",),
          "RunInstances refuses an instance profile that does not exist",
          EC2_API.format("RunInstances"), _unknown_profile, "InvalidParameterValue", _ex_unknown_profile),
    _rule("subnet-cidr-size", ("CreateSubnet",), "A subnet's CIDR block is between /16 and /28", _SIZING,
          _cidr("InvalidSubnet.Range"), "InvalidSubnet.Range",
          lambda c: request("ec2", "CreateSubnet", VpcId=vpc(c), CidrBlock="10.0.1.0/29")),
)  # fmt: skip
