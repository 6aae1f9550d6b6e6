"""A normalised inventory of everything in the sandbox account that belongs to one environment, read
straight from the sandbox (not from vmplane's records), so two runs of the same spec compare equal.

Scope: what carries the job's tag, plus everything inside the job's VPCs whether tagged or not (the
default security group, the main route table, routes and associations), IAM by the environment's
names, and the Route53 records under the environment's domain (records cannot carry tags).
Normalised: ids become names or roles, the env name / job id / LB name / domain become placeholders,
and timestamps, addresses and DNS names are left out; lists are sorted.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.helpers import Sandbox
from tests.integration.sweep_ec2 import AWS_ID, CERT_ARN, Labels, ec2_inventory, has_job, tags_of


def _autoscaling(sb: Sandbox, job_id: str) -> list[dict[str, Any]]:
    asg = sb.client("autoscaling")
    groups = [
        g
        for page in asg.get_paginator("describe_auto_scaling_groups").paginate()
        for g in page["AutoScalingGroups"]
        if any(t["Key"] == "zop:jobId" and t["Value"] == job_id for t in g.get("Tags", []))
    ]
    out = []
    for g in groups:
        policies = asg.describe_policies(AutoScalingGroupName=g["AutoScalingGroupName"])["ScalingPolicies"]
        out.append(
            {
                "name": g["AutoScalingGroupName"],
                "min": g["MinSize"],
                "max": g["MaxSize"],
                "desired": g["DesiredCapacity"],
                "launchTemplate": g.get("LaunchTemplate"),
                "subnets": sorted(filter(None, g.get("VPCZoneIdentifier", "").split(","))),
                "targetGroups": sorted(g.get("TargetGroupARNs", [])),
                "healthCheck": [g.get("HealthCheckType"), g.get("HealthCheckGracePeriod")],
                "instances": len(g.get("Instances", [])),
                "policies": [
                    {
                        "name": p["PolicyName"],
                        "type": p.get("PolicyType"),
                        "target": p.get("TargetTrackingConfiguration"),
                    }
                    for p in policies
                ],
                "tags": {t["Key"]: [t["Value"], t.get("PropagateAtLaunch")] for t in g.get("Tags", [])},
            }
        )
    return out


def _schedules(sb: Sandbox, org: str, name: str, job_id: str) -> dict[str, Any]:
    """ASG scheduled actions on the environment's groups (by name: the sandbox keeps them even after
    their group is gone), and the EventBridge Scheduler groups tagged with the job with their schedules."""
    asg, sched = sb.client("autoscaling"), sb.client("scheduler")
    prefix = f"vmplane-{org}-{name}-"
    actions = [
        {
            "name": a["ScheduledActionName"],
            "group": a["AutoScalingGroupName"],
            "when": [a.get("Recurrence"), a.get("TimeZone")],
            "sizes": [a.get("MinSize"), a.get("DesiredCapacity"), a.get("MaxSize")],
        }
        for page in asg.get_paginator("describe_scheduled_actions").paginate()
        for a in page["ScheduledUpdateGroupActions"]
        if a["AutoScalingGroupName"].startswith(prefix)
    ]
    groups, schedules = [], []
    for g in sched.list_schedule_groups()["ScheduleGroups"]:
        tags = tags_of(sched.list_tags_for_resource(ResourceArn=g["Arn"]))
        if tags.get("zop:jobId") != job_id:
            continue
        groups.append({"name": g["Name"], "tags": tags})
        for item in sched.list_schedules(GroupName=g["Name"])["Schedules"]:
            s = sched.get_schedule(Name=item["Name"], GroupName=g["Name"])
            schedules.append(
                {
                    "name": s["Name"],
                    "group": s["GroupName"],
                    "when": [s["ScheduleExpression"], s.get("ScheduleExpressionTimezone"), s.get("State")],
                    "window": s.get("FlexibleTimeWindow"),
                    "target": {k: s["Target"].get(k) for k in ("Arn", "RoleArn", "Input", "RetryPolicy")},
                }
            )
    return {"scheduled_actions": actions, "schedule_groups": groups, "schedules": schedules}


def _iam(sb: Sandbox, org: str, name: str, job_id: str) -> dict[str, Any]:
    iam = sb.client("iam")
    prefix = f"vmplane-{org}-{name}-"
    roles = [r for r in iam.list_roles()["Roles"] if r["RoleName"].startswith(prefix)]
    roles += [
        r
        for r in iam.list_roles()["Roles"]
        if not r["RoleName"].startswith(prefix)
        and has_job({"Tags": iam.list_role_tags(RoleName=r["RoleName"])["Tags"]}, job_id)
    ]
    profiles = [
        p for p in iam.list_instance_profiles()["InstanceProfiles"] if p["InstanceProfileName"].startswith(prefix)
    ]
    return {
        "roles": [
            {
                "name": r["RoleName"],
                "assume": r["AssumeRolePolicyDocument"],
                "attached": sorted(
                    p["PolicyArn"] for p in iam.list_attached_role_policies(RoleName=r["RoleName"])["AttachedPolicies"]
                ),
                "inline": sorted(iam.list_role_policies(RoleName=r["RoleName"])["PolicyNames"]),
                "tags": tags_of({"Tags": iam.list_role_tags(RoleName=r["RoleName"])["Tags"]}),
            }
            for r in roles
        ],
        "instance_profiles": [
            {"name": p["InstanceProfileName"], "roles": sorted(r["RoleName"] for r in p.get("Roles", []))}
            for p in profiles
        ],
    }


def _elb(sb: Sandbox, job_id: str) -> dict[str, Any]:
    elb = sb.client("elbv2")

    def tagged(arns: list[str]) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        for i in range(0, len(arns), 20):
            for d in elb.describe_tags(ResourceArns=arns[i : i + 20])["TagDescriptions"]:
                tags = tags_of(d)
                if tags.get("zop:jobId") == job_id:
                    out[d["ResourceArn"]] = tags
        return out

    lbs = elb.describe_load_balancers()["LoadBalancers"]
    lb_tags = tagged([lb["LoadBalancerArn"] for lb in lbs])
    tgs = elb.describe_target_groups()["TargetGroups"]
    tg_tags = tagged([t["TargetGroupArn"] for t in tgs])
    out_lbs = []
    for lb in (x for x in lbs if x["LoadBalancerArn"] in lb_tags):
        arn = lb["LoadBalancerArn"]
        listeners = elb.describe_listeners(LoadBalancerArn=arn)["Listeners"]
        attrs = elb.describe_load_balancer_attributes(LoadBalancerArn=arn)["Attributes"]
        out_lbs.append(
            {
                "name": lb["LoadBalancerName"],
                "arn": arn,
                "scheme": lb.get("Scheme"),
                "type": lb.get("Type"),
                "subnets": sorted(z["SubnetId"] for z in lb.get("AvailabilityZones", [])),
                "groups": sorted(lb.get("SecurityGroups", [])),
                "attributes": {a["Key"]: a["Value"] for a in attrs},
                "listeners": [
                    {
                        "port": li["Port"],
                        "protocol": li["Protocol"],
                        "sslPolicy": li.get("SslPolicy"),
                        "certificates": sorted(c["CertificateArn"] for c in li.get("Certificates", [])),
                        "actions": li.get("DefaultActions"),
                    }
                    for li in listeners
                ],
                "tags": lb_tags[arn],
            }
        )
    out_tgs = []
    for tg in (x for x in tgs if x["TargetGroupArn"] in tg_tags):
        arn = tg["TargetGroupArn"]
        attrs = elb.describe_target_group_attributes(TargetGroupArn=arn)["Attributes"]
        out_tgs.append(
            {
                "name": tg["TargetGroupName"],
                "arn": arn,
                "protocol": [tg.get("Protocol"), tg.get("Port"), tg.get("TargetType")],
                "health": {k: v for k, v in tg.items() if k.startswith("HealthCheck") or k == "Matcher"},
                "attributes": {a["Key"]: a["Value"] for a in attrs},
                "loadBalancers": sorted(tg.get("LoadBalancerArns", [])),
                "tags": tg_tags[arn],
            }
        )
    return {"load_balancers": out_lbs, "target_groups": out_tgs}


def _acm(sb: Sandbox, job_id: str) -> list[dict[str, Any]]:
    acm = sb.client("acm")
    out = []
    for page in acm.get_paginator("list_certificates").paginate(
        Includes={"keyTypes": ["RSA_2048", "EC_prime256v1", "RSA_4096", "EC_secp384r1"]}
    ):
        for c in page["CertificateSummaryList"]:
            tags = tags_of({"Tags": acm.list_tags_for_certificate(CertificateArn=c["CertificateArn"]).get("Tags", [])})
            if tags.get("zop:jobId") != job_id:
                continue
            cert = acm.describe_certificate(CertificateArn=c["CertificateArn"])["Certificate"]
            out.append(
                {
                    "arn": cert["CertificateArn"],
                    "domain": cert["DomainName"],
                    "status": cert["Status"],
                    "validation": [o.get("ValidationMethod") for o in cert.get("DomainValidationOptions", [])],
                    "tags": tags,
                }
            )
    return out


def _route53(sb: Sandbox, domain: str) -> list[dict[str, Any]]:
    r53 = sb.client("route53")
    out = []
    for zone in r53.list_hosted_zones()["HostedZones"]:
        for page in r53.get_paginator("list_resource_record_sets").paginate(HostedZoneId=zone["Id"]):
            for rr in page["ResourceRecordSets"]:
                if rr["Name"].rstrip(".") == domain or rr["Name"].rstrip(".").endswith("." + domain):
                    alias = rr.get("AliasTarget")
                    out.append(
                        {
                            # Validation record names and values are random tokens: keep their shape.
                            "name": re.sub(r"^_[0-9a-f]+\.", "_<token>.", rr["Name"]),
                            "type": rr["Type"],
                            "ttl": rr.get("TTL"),
                            "values": len(rr.get("ResourceRecords", [])),
                            "alias": bool(alias),
                            "evaluateHealth": (alias or {}).get("EvaluateTargetHealth"),
                        }
                    )
    return out


def inventory(sb: Sandbox, *, job_id: str, org: str, name: str, domain: str, lb_name: str) -> dict[str, Any]:
    labels = Labels()
    raw: dict[str, Any] = ec2_inventory(sb, job_id, labels)
    raw["auto_scaling_groups"] = _autoscaling(sb, job_id)
    raw.update(_schedules(sb, org, name, job_id))
    raw.update(_iam(sb, org, name, job_id))
    raw.update(_elb(sb, job_id))
    raw["certificates"] = _acm(sb, job_id)
    raw["dns_records"] = _route53(sb, domain)
    for tg in raw["target_groups"]:
        labels.by_id[tg["arn"]] = f"tg:{tg['name']}"
    for c in raw["certificates"]:
        labels.by_id[c["arn"]] = f"cert:{c['domain']}"
    for lb in raw["load_balancers"]:
        labels.by_id[lb["arn"]] = f"lb:{lb['name']}"
    subs = sorted(labels.by_id.items(), key=lambda kv: -len(kv[0]))
    names = [(job_id, "<job>"), (domain, "<domain>"), (lb_name, "<lb>"), (name, "<env>")]

    def norm(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: norm(v) for k, v in sorted(value.items())}
        if isinstance(value, list):
            items = [norm(v) for v in value]
            return sorted(items, key=lambda x: json.dumps(x, sort_keys=True, default=str))
        if isinstance(value, str):
            for rid, label in subs:
                value = value.replace(rid, label)
            for real, placeholder in names:
                value = value.replace(real, placeholder)
            value = CERT_ARN.sub("certificate/<uuid>", value)
            return AWS_ID.sub("<unlabelled-id>", value)
        return value

    return {k: norm(v) for k, v in raw.items()}


def remaining(inv: dict[str, Any]) -> dict[str, Any]:
    """The kinds that still hold something (empty when the environment is completely gone)."""
    return {k: v for k, v in inv.items() if v}
