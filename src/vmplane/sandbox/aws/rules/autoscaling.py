"""EC2 Auto Scaling: a group with instances is not deleted without ForceDelete, sizes keep
min <= desired <= max, names are unique, and scheduled actions are checked as AWS checks them (a
five-field cron, a start time not in the past, at least one size). moto checks none of these."""

from __future__ import annotations

import datetime as dt
import re
from functools import partial
from typing import Any

from vmplane.sandbox.aws.rule import AwsFault, AwsRequest, Clients
from vmplane.sandbox.aws.rules._common import ami, backend, fault, make_rule, p, request, subnet, vpc, when

_API = "https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_{}.html"
_SCHEDULED = "https://docs.aws.amazon.com/autoscaling/ec2/userguide/ec2-auto-scaling-scheduled-scaling.html"
_CRON_FIELD = re.compile(r"^[\d*,/\-A-Za-z?LW#]+$")


def _group(req: AwsRequest) -> Any:
    return backend("autoscaling", req).autoscaling_groups.get(p(req, "AutoScalingGroupName"))


def _bad(message: str) -> AwsFault:
    return fault("ValidationError", message)


def _delete_in_use(req: AwsRequest) -> AwsFault | None:
    group = _group(req)
    if group is not None and not p(req, "ForceDelete") and (group.instance_states or group.desired_capacity):
        return fault(
            "ResourceInUse",
            "You cannot delete an AutoScalingGroup while there are instances or pending Spot instance request(s) "
            "still in the group.",
        )
    return None


def _sizes(req: AwsRequest) -> AwsFault | None:
    group = _group(req) if req.operation == "UpdateAutoScalingGroup" else None
    low = p(req, "MinSize", group.min_size if group else None)
    high = p(req, "MaxSize", group.max_size if group else None)
    want = p(req, "DesiredCapacity", group.desired_capacity if group and "DesiredCapacity" in req.params else None)
    if low is not None and high is not None and int(low) > int(high):
        return _bad(f"Max bound, {high}, must be greater than or equal to min bound, {low}")
    if want is not None and low is not None and high is not None and not int(low) <= int(want) <= int(high):
        return _bad(f"Desired capacity:{want} must be between the specified min size:{low} and max size:{high}")
    return None


def _set_desired(req: AwsRequest) -> AwsFault | None:
    group = _group(req)
    want = int(p(req, "DesiredCapacity", 0))
    if group is not None and want > group.max_size:
        return _bad(
            f"New SetDesiredCapacity value {want} is above max value {group.max_size} for the AutoScalingGroup."
        )
    if group is not None and want < group.min_size:
        return _bad(
            f"New SetDesiredCapacity value {want} is below min value {group.min_size} for the AutoScalingGroup."
        )
    return None


def _name_exists(req: AwsRequest) -> AwsFault | None:
    name = p(req, "AutoScalingGroupName")
    if _group(req) is not None:
        return fault(
            "AlreadyExists",
            f"AutoScalingGroup by this name already exists - A group with the name {name} already exists",
        )
    return None


def _recurrence(req: AwsRequest) -> AwsFault | None:
    text = p(req, "Recurrence")
    if text is None:
        return None
    fields = str(text).split()
    if len(fields) != 5 or not all(_CRON_FIELD.match(f) for f in fields):
        return _bad(f"Given recurrence string '{text}' is invalid: a recurrence is a five-field Unix cron expression")
    return None


def _start_time(req: AwsRequest) -> AwsFault | None:
    start = when(p(req, "StartTime"))
    if start is not None and start < dt.datetime.now(dt.UTC):
        return _bad("Given start time is in the past")
    return None


def _some_size(req: AwsRequest) -> AwsFault | None:
    if all(p(req, k) is None for k in ("MinSize", "MaxSize", "DesiredCapacity")):
        return _bad("At least one of MinSize, MaxSize or DesiredCapacity must be specified")
    return None


def _make_group(clients: Clients, desired: int = 1) -> str:
    ec2c = clients("ec2")
    ec2c.create_launch_template(
        LaunchTemplateName="web", LaunchTemplateData={"ImageId": ami(clients), "InstanceType": "t3.micro"}
    )
    clients("autoscaling").create_auto_scaling_group(
        AutoScalingGroupName="web", LaunchTemplate={"LaunchTemplateName": "web"}, MinSize=0, MaxSize=2,
        DesiredCapacity=desired, VPCZoneIdentifier=subnet(clients, vpc(clients), "10.0.1.0/24"),
    )  # fmt: skip
    return "web"


def _ex_delete_in_use(clients: Clients) -> AwsRequest:
    return request("autoscaling", "DeleteAutoScalingGroup", AutoScalingGroupName=_make_group(clients))


def _ex_create_sizes(clients: Clients) -> AwsRequest:
    clients("ec2").create_launch_template(LaunchTemplateName="web", LaunchTemplateData={"ImageId": ami(clients)})
    return request(
        "autoscaling", "CreateAutoScalingGroup", AutoScalingGroupName="web",
        LaunchTemplate={"LaunchTemplateName": "web"},
        MinSize=1, MaxSize=2, DesiredCapacity=3, VPCZoneIdentifier=subnet(clients, vpc(clients), "10.0.1.0/24"),
    )  # fmt: skip


def _ex_update_sizes(clients: Clients) -> AwsRequest:
    return request("autoscaling", "UpdateAutoScalingGroup", AutoScalingGroupName=_make_group(clients), MinSize=3)


def _ex_set_desired(clients: Clients) -> AwsRequest:
    return request("autoscaling", "SetDesiredCapacity", AutoScalingGroupName=_make_group(clients), DesiredCapacity=5)


def _ex_name_exists(clients: Clients) -> AwsRequest:
    name = _make_group(clients, 0)
    return request(
        "autoscaling", "CreateAutoScalingGroup", AutoScalingGroupName=name,
        LaunchTemplate={"LaunchTemplateName": "web"},
        MinSize=0, MaxSize=1, VPCZoneIdentifier=subnet(clients, vpc(clients, "10.1.0.0/16"), "10.1.1.0/24"),
    )  # fmt: skip


def _scheduled(clients: Clients, **kw: Any) -> AwsRequest:
    name = _make_group(clients, 0)
    return request(
        "autoscaling", "PutScheduledUpdateGroupAction", AutoScalingGroupName=name, ScheduledActionName="up", **kw
    )


_rule = partial(make_rule, "autoscaling")


_PUT = ("PutScheduledUpdateGroupAction",)
RULES = (
    _rule("delete-with-instances", ("DeleteAutoScalingGroup",),
          "A group with instances (or a desired capacity) is not deleted without ForceDelete",
          _API.format("DeleteAutoScalingGroup"), _delete_in_use, "ResourceInUse", _ex_delete_in_use),
    _rule("create-size-order", ("CreateAutoScalingGroup",), "A group's sizes keep min <= desired <= max",
          _API.format("CreateAutoScalingGroup"), _sizes, "ValidationError", _ex_create_sizes),
    _rule("update-size-order", ("UpdateAutoScalingGroup",),
          "An update keeps min <= desired <= max with the group's values",
          _API.format("UpdateAutoScalingGroup"), _sizes, "ValidationError", _ex_update_sizes),
    _rule("set-desired-within-bounds", ("SetDesiredCapacity",), "A desired capacity outside min..max is refused",
          _API.format("SetDesiredCapacity"), _set_desired, "ValidationError", _ex_set_desired),
    _rule("group-name-exists", ("CreateAutoScalingGroup",), "A group name already in use is refused",
          _API.format("CreateAutoScalingGroup"), _name_exists, "AlreadyExists", _ex_name_exists),
    _rule("scheduled-recurrence-cron", _PUT, "A scheduled action's Recurrence is a five-field Unix cron expression",
          _SCHEDULED, _recurrence, "ValidationError",
          lambda c: _scheduled(c, Recurrence="0 8 * * MON-FRI *", MinSize=1)),
    _rule("scheduled-start-in-past", _PUT, "A scheduled action's StartTime may not be in the past",
          _API.format("PutScheduledUpdateGroupAction"), _start_time, "ValidationError",
          lambda c: _scheduled(c, StartTime=dt.datetime(2020, 1, 1, tzinfo=dt.UTC), MinSize=1)),
    _rule("scheduled-needs-a-size", _PUT, "A scheduled action sets at least one of MinSize, MaxSize, DesiredCapacity",
          _API.format("PutScheduledUpdateGroupAction"), _some_size, "ValidationError",
          lambda c: _scheduled(c, Recurrence="0 8 * * *")),
)  # fmt: skip
