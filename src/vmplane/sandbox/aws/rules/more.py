"""Smaller rules of several services: what a target group needs for instance targets, a listener port
used once per load balancer, Route 53 record values (TXT quoting, one CNAME value), IAM detaches and
deletes of what is attached, an Auto Scaling group's launch template, S3's reserved tag prefix."""

from __future__ import annotations

import json
from typing import Any

from vmplane.sandbox.aws.rule import AwsFault, AwsRequest, Clients, Rule
from vmplane.sandbox.aws.rules._common import ELB_API, backend, fault, p, request, subnet, tags_of, vpc
from vmplane.sandbox.aws.rules.route53 import _batch, _change, _changes, _values, _zone_with

_R53 = "https://docs.aws.amazon.com/Route53/latest/DeveloperGuide/ResourceRecordTypes.html"
_IAM = "https://docs.aws.amazon.com/IAM/latest/APIReference/API_{}.html"
_POLICY = json.dumps(
    {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}]}
)
_TRUST = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
    }
)


def _tg_needs(member: str) -> Any:
    def check(req: AwsRequest) -> AwsFault | None:
        if p(req, "TargetType", "instance") in ("instance", "ip") and p(req, member) is None:
            return fault(
                "ValidationError", f"A {member.lower()} must be specified for target groups of this target type"
            )
        return None

    return check


def _ex_tg_without(member: str) -> Any:
    def example(clients: Clients) -> AwsRequest:
        params: dict[str, Any] = {"Name": "web", "Protocol": "HTTP", "Port": 80, "VpcId": vpc(clients)}
        params.pop(member)
        return request("elbv2", "CreateTargetGroup", **params)

    return example


def _listener_port(req: AwsRequest) -> AwsFault | None:
    lb = backend("elbv2", req).load_balancers.get(p(req, "LoadBalancerArn"))
    if lb is not None and any(int(lst.port) == int(p(req, "Port", -1)) for lst in lb.listeners.values()):
        return fault("DuplicateListener", "A listener already exists on this port for this load balancer")
    return None


def _ex_listener_port(clients: Clients) -> AwsRequest:
    v = vpc(clients)
    a, b = subnet(clients, v, "10.0.1.0/24", "us-east-1a"), subnet(clients, v, "10.0.2.0/24", "us-east-1b")
    elb = clients("elbv2")
    lb = elb.create_load_balancer(Name="web", Subnets=[a, b])["LoadBalancers"][0]["LoadBalancerArn"]
    action = [{"Type": "fixed-response", "FixedResponseConfig": {"StatusCode": "404"}}]
    elb.create_listener(LoadBalancerArn=lb, Protocol="HTTP", Port=80, DefaultActions=action)
    return request("elbv2", "CreateListener", LoadBalancerArn=lb, Protocol="HTTP", Port=80, DefaultActions=action)


def _txt_quoted(req: AwsRequest) -> AwsFault | None:
    for change in _changes(req):
        rrset = change["ResourceRecordSet"]
        for value in _values(rrset.get("ResourceRecords")) if rrset["Type"] in ("TXT", "SPF") else ():
            if not (value.startswith('"') and value.endswith('"')):
                return fault(
                    "InvalidChangeBatch",
                    "[Invalid Resource Record: 'FATAL problem: InvalidCharacterString "
                    f"(Value should be enclosed in quotation marks) encountered with '{value}'']",
                )
    return None


def _one_cname(req: AwsRequest) -> AwsFault | None:
    for change in _changes(req):
        rrset = change["ResourceRecordSet"]
        if rrset["Type"] == "CNAME" and len(rrset.get("ResourceRecords") or ()) > 1:
            return fault(
                "InvalidChangeBatch", f"[RRSet of type CNAME with DNS name {rrset['Name']} has more than one value]"
            )
    return None


def _ex_two_cnames(clients: Clients) -> AwsRequest:
    change = _change("CREATE", "www.example.com", "CNAME", "a.example.net")
    change["ResourceRecordSet"]["ResourceRecords"].append({"Value": "b.example.net"})
    return _batch(_zone_with(clients), change)


def _role(req: AwsRequest) -> Any:
    return next((r for r in backend("iam", req).roles.values() if r.name == p(req, "RoleName")), None)


def _detach_not_attached(req: AwsRequest) -> AwsFault | None:
    role = _role(req)
    if role is not None and p(req, "PolicyArn") not in role.managed_policies:
        return fault("NoSuchEntity", f"Policy {p(req, 'PolicyArn')} was not found.", 404)
    return None


def _ex_detach(clients: Clients) -> AwsRequest:
    iam = clients("iam")
    iam.create_role(RoleName="web", AssumeRolePolicyDocument=_TRUST)
    arn = iam.create_policy(PolicyName="p", PolicyDocument=_POLICY)["Policy"]["Arn"]
    return request("iam", "DetachRolePolicy", RoleName="web", PolicyArn=arn)


def _delete_policy_attached(req: AwsRequest) -> AwsFault | None:
    policy = backend("iam", req).managed_policies.get(p(req, "PolicyArn"))
    if policy is not None and policy.attachment_count > 0:
        return fault("DeleteConflict", "Cannot delete a policy attached to entities.", 409)
    return None


def _ex_delete_policy(clients: Clients) -> AwsRequest:
    iam = clients("iam")
    iam.create_role(RoleName="web", AssumeRolePolicyDocument=_TRUST)
    arn = iam.create_policy(PolicyName="p", PolicyDocument=_POLICY)["Policy"]["Arn"]
    iam.attach_role_policy(RoleName="web", PolicyArn=arn)
    return request("iam", "DeletePolicy", PolicyArn=arn)


def _asg_template(req: AwsRequest) -> AwsFault | None:
    spec = p(req, "LaunchTemplate") or {}
    ec2 = backend("ec2", req)
    name, tid = spec.get("LaunchTemplateName"), spec.get("LaunchTemplateId")
    if (name and name not in ec2.launch_template_name_to_ids) or (tid and tid not in ec2.launch_templates):
        return fault(
            "ValidationError",
            f"You must use a valid fully-formed launch template. The specified launch template, with template "
            f"{'name' if name else 'ID'} {name or tid}, does not exist.",
        )
    return None


def _ex_asg_template(clients: Clients) -> AwsRequest:
    return request(
        "autoscaling", "CreateAutoScalingGroup", AutoScalingGroupName="web", MinSize=0, MaxSize=1,
        LaunchTemplate={"LaunchTemplateName": "vmplane-missing"},
        VPCZoneIdentifier=subnet(clients, vpc(clients), "10.0.1.0/24"),
    )  # fmt: skip


def _s3_reserved(req: AwsRequest) -> AwsFault | None:
    tags = tags_of((p(req, "Tagging") or {}).get("TagSet"))
    if any(k.lower().startswith("aws:") for k, _ in tags):
        return fault("InvalidTag", "System tags cannot be added/updated by requester")
    return None


def _ex_s3_reserved(clients: Clients) -> AwsRequest:
    clients("s3").create_bucket(Bucket="vmplane-tags")
    return request(
        "s3", "PutBucketTagging", Bucket="vmplane-tags", Tagging={"TagSet": [{"Key": "aws:owner", "Value": "me"}]}
    )


def _lb_groups(req: AwsRequest) -> AwsFault | None:
    ec2 = backend("ec2", req)
    for gid in p(req, "SecurityGroups") or ():
        if ec2.get_security_group_from_id(gid) is None:
            return fault("InvalidSecurityGroup", f"Security group '{gid}' does not exist")
    return None


def _ex_lb_groups(clients: Clients) -> AwsRequest:
    v = vpc(clients)
    a, b = subnet(clients, v, "10.0.1.0/24", "us-east-1a"), subnet(clients, v, "10.0.2.0/24", "us-east-1b")
    return request("elbv2", "CreateLoadBalancer", Name="web", Subnets=[a, b], SecurityGroups=["sg-0123456789abcdef0"])


def _schedule_group(req: AwsRequest) -> AwsFault | None:
    name = p(req, "GroupName")
    if name and name != "default" and name not in backend("scheduler", req).schedule_groups:
        return fault("ResourceNotFoundException", f"Schedule group {name} does not exist.", 404)
    return None


def _ex_schedule_group(clients: Clients) -> AwsRequest:
    target = {"Arn": "arn:aws:lambda:us-east-1:123456789012:function:f", "RoleArn": "arn:aws:iam::123456789012:role/r"}
    return request(
        "scheduler", "CreateSchedule", Name="nightly", GroupName="vmplane-missing", ScheduleExpression="rate(1 hour)",
        FlexibleTimeWindow={"Mode": "OFF"}, Target=target,
    )  # fmt: skip


RULES = (
    Rule("elbv2.target-group-port-required", "elbv2", ("CreateTargetGroup",),
         "A target group for instance or IP targets needs a Port", ELB_API.format("CreateTargetGroup"),
         _tg_needs("Port"), "ValidationError", _ex_tg_without("Port")),
    Rule("elbv2.target-group-vpc-required", "elbv2", ("CreateTargetGroup",),
         "A target group for instance or IP targets needs a VpcId", ELB_API.format("CreateTargetGroup"),
         _tg_needs("VpcId"), "ValidationError", _ex_tg_without("VpcId")),
    Rule("elbv2.listener-port-once", "elbv2", ("CreateListener",), "A load balancer has one listener per port",
         ELB_API.format("CreateListener"), _listener_port, "DuplicateListener", _ex_listener_port),
    Rule("route53.txt-value-quoted", "route53", ("ChangeResourceRecordSets",),
         "A TXT or SPF value is enclosed in quotation marks", f"{_R53}#TXTFormat", _txt_quoted, "InvalidChangeBatch",
         lambda c: _batch(_zone_with(c), _change("CREATE", "www.example.com", "TXT", "v=spf1 -all"))),
    Rule("route53.cname-one-value", "route53", ("ChangeResourceRecordSets",),
         "A CNAME record holds exactly one value",
         f"{_R53}#CNAMEFormat", _one_cname, "InvalidChangeBatch", _ex_two_cnames),
    Rule("iam.detach-not-attached", "iam", ("DetachRolePolicy",),
         "Detaching a policy the role does not have is refused",
         _IAM.format("DetachRolePolicy"), _detach_not_attached, "NoSuchEntity", _ex_detach),
    Rule("iam.delete-policy-attached", "iam", ("DeletePolicy",), "A managed policy still attached cannot be deleted",
         _IAM.format("DeletePolicy"), _delete_policy_attached, "DeleteConflict", _ex_delete_policy),
    Rule("autoscaling.launch-template-exists", "autoscaling", ("CreateAutoScalingGroup", "UpdateAutoScalingGroup"),
         "A group's launch template must exist",
         "https://docs.aws.amazon.com/autoscaling/ec2/userguide/ts-as-launch-template.html", _asg_template,
         "ValidationError", _ex_asg_template),
    Rule("elbv2.lb-security-group-exists", "elbv2", ("CreateLoadBalancer",),
         "A load balancer's security groups must exist", ELB_API.format("CreateLoadBalancer"), _lb_groups,
         "InvalidSecurityGroup", _ex_lb_groups),
    Rule("scheduler.group-exists", "scheduler", ("CreateSchedule", "UpdateSchedule"),
         "A schedule's group must exist", "https://docs.aws.amazon.com/scheduler/latest/APIReference/API_CreateSchedule.html",
         _schedule_group, "ResourceNotFoundException", _ex_schedule_group),
    Rule("s3.tag-key-aws-prefix", "s3", ("PutBucketTagging",), "Tag keys starting with aws: are reserved on buckets",
         "https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutBucketTagging.html", _s3_reserved, "InvalidTag",
         _ex_s3_reserved),
)  # fmt: skip
