"""Removing the load balancer (vmOp detach_lb, and the first teardown step): DNS records, listeners,
the ASGs' target group attachments, the ALB, target groups, the LB's security group (and the VM
group's rules that referenced it), the validation records and the certificate. The VMs stay."""

from __future__ import annotations

import contextlib
from functools import partial

from vmplane.clouds import deletes
from vmplane.clouds.aws import certs, dns, lb
from vmplane.clouds.aws.asg import job_scaling_groups
from vmplane.clouds.aws.errors import aws_call
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.security_groups import ensure_security_group, revoke_pair
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.aws.tags import find_tagged, job_filters
from vmplane.clouds.base import Context
from vmplane.clouds.errors import InvalidRequestError, NotFoundError
from vmplane.clouds.waits import poll
from vmplane.state import InfraConfig

GONE_TIMEOUT = 600.0


def detach(aws: AwsClients, ctx: Context, *, keep_vms: bool) -> None:
    """Remove the LB and everything that belongs to it, found by record and by tag; the VMs stay.

    With `keep_vms` the VM security group gets its VPC-internal rules back (the LB-only rule goes);
    in teardown the group is deleted next anyway.
    """
    infra, t = ctx.infra, ctx.tagger
    if not started(infra):
        ctx.log("no load balancer was created for this job")
        return
    for rec in [r for r in aws_ids(infra).DNSRecords if r.Type == "A"]:
        dns.delete_record(aws, rec)
        aws_ids(infra).DNSRecords = [r for r in aws_ids(infra).DNSRecords if r != rec]
        ctx.save()
    # One scan of the job's ELB resources serves the whole detach.
    arns = [a for a, _ in lb.job_elb_resources(aws, t)]
    lbs = [a for a in arns if ":loadbalancer/" in a]
    tgs = [a for a in arns if ":targetgroup/" in a]
    for arn in lbs:
        for listener in aws_call(aws.elbv2.describe_listeners, LoadBalancerArn=arn)["Listeners"]:
            la = listener["ListenerArn"]
            deletes.delete(partial(aws_call, aws.elbv2.delete_listener, ListenerArn=la), what=f"delete {la}")
    aws_ids(infra).ListenerArns = []
    ctx.save()
    for group in job_scaling_groups(aws, t):
        for tg in tgs:
            with contextlib.suppress(NotFoundError, InvalidRequestError):
                aws_call(
                    aws.autoscaling.detach_load_balancer_target_groups, AutoScalingGroupName=group, TargetGroupARNs=[tg]
                )
    for arn in lbs:
        deletes.delete(partial(aws_call, aws.elbv2.delete_load_balancer, LoadBalancerArn=arn), what=f"delete {arn}")
    for arn in lbs:

        def gone(a: str = arn) -> bool | None:
            return True if _lb_gone(aws, a) else None

        poll(gone, what="load balancer deletion", timeout=GONE_TIMEOUT)
    ids = aws_ids(infra)
    infra.LoadBalancerID = infra.LoadBalancerDNSName = ids.LoadBalancerZoneID = ids.LoadBalancerName = None
    ctx.save()
    for tg in tgs:
        # "ResourceInUse" until the LB and the groups' attachments are gone.
        deletes.delete(partial(aws_call, aws.elbv2.delete_target_group, TargetGroupArn=tg), what=f"delete {tg}")
    aws_ids(infra).TargetGroupArn = None
    lb_sgs = [
        g["GroupId"] for g in find_tagged(aws.ec2.describe_security_groups, "SecurityGroups", job_filters(t, "lb-sg"))
    ]
    aws_ids(infra).LoadBalancerSecurityGroupID = None
    ctx.save()
    _drop_vm_ingress_from(aws, ctx, lb_sgs, restore=keep_vms)
    for gid in lb_sgs:
        # The ALB's network interfaces release the group a little after the ALB is gone.
        deletes.delete(partial(aws_call, aws.ec2.delete_security_group, GroupId=gid), what=f"delete {gid}")
    for rec in list(aws_ids(infra).DNSRecords):  # the certificate's validation records
        dns.delete_record(aws, rec)
        aws_ids(infra).DNSRecords = [r for r in aws_ids(infra).DNSRecords if r != rec]
        ctx.save()
    certs.delete_job_certificates(aws, ctx)
    ctx.log(f"load balancer removed: {len(lbs)} ALB, {len(tgs)} target groups, {len(lb_sgs)} security groups")


def started(infra: InfraConfig) -> bool:
    """Whether any LB part may exist: stepCreateLoadBalancer records the name before creating anything,
    and detach clears the certificate last. Saves a tag scan of ELB and ACM on every other teardown."""
    ids = aws_ids(infra)
    return bool(
        infra.LoadBalancerID
        or ids.LoadBalancerName
        or ids.TargetGroupArn
        or ids.LoadBalancerSecurityGroupID
        or ids.ListenerArns
        or ids.CertificateArn
        or ids.CertificateRequested
        or ids.DNSRecords
    )


def _drop_vm_ingress_from(aws: AwsClients, ctx: Context, lb_sgs: list[str], *, restore: bool) -> None:
    vm_groups = find_tagged(aws.ec2.describe_security_groups, "SecurityGroups", job_filters(ctx.tagger, "vm-sg"))
    if restore and vm_groups and aws_ids(ctx.infra).VpcCidr:
        ensure_security_group(aws, ctx)  # desired rules without an LB: ingress ports from the VPC
        return
    for g in vm_groups:
        refs = [
            {**{k: p[k] for k in ("IpProtocol", "FromPort", "ToPort") if k in p}, "UserIdGroupPairs": pairs}
            for p in g.get("IpPermissions", [])
            if (pairs := [revoke_pair(x) for x in p.get("UserIdGroupPairs", []) if x["GroupId"] in lb_sgs])
        ]
        if refs:
            with contextlib.suppress(NotFoundError):
                aws_call(aws.ec2.revoke_security_group_ingress, GroupId=g["GroupId"], IpPermissions=refs)


def _lb_gone(aws: AwsClients, arn: str) -> bool:
    try:
        aws_call(aws.elbv2.describe_load_balancers, LoadBalancerArns=[arn])
    except NotFoundError:
        return True
    return False
