"""Every resource kind the AWS driver makes, declared once (`clouds.resources`).

Leftovers (what teardown must leave none of), drift's observed and extra resources, and the agreement of
the plan's addresses, the sandbox and the generated stack (tests/integration/test_aws_resource_table.py)
derive from this table. A kind with `observe=None` is a part of another kind's resource (a rule of a
group, a policy attachment of a role) and is read, where drift needs it, with that resource.
"""

from __future__ import annotations

from vmplane.clouds.aws import resource_parts as p
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.resources import ResourceKind, ResourceTable

K = ResourceKind[AwsClients]
NET, IAM, LT, VMS = "stepCreateNetwork", "stepCreateIAM", "stepCreateLaunchTemplate", "stepCreateVMs"
LB, TG, LISTENER, DNS = "stepCreateLoadBalancer", "stepCreateTargetGroup", "stepCreateListener", "stepCreateDNSRecord"
DEL_LB, DEL_VMS, DEL_LT = "stepDetachLoadBalancer", "stepTerminateVMs", "stepDeleteLaunchTemplate"
DEL_SG, DEL_IAM, DEL_NET = "stepDeleteSecurityGroup", "stepDeleteIAM", "stepDeleteNetwork"
LIVE_INSTANCE = [{"Name": "instance-state-name", "Values": p.INSTANCE_STATES}]
LIVE_NAT = [{"Name": "state", "Values": p.NAT_STATES}]

TABLE: ResourceTable[AwsClients] = ResourceTable(
    "aws",
    (
        # ---- network (stepCreateNetwork; none of it for an existing VPC) ----
        K(
            "vpc",
            "aws_vpc",
            NET,
            DEL_NET,
            "vpc",
            p.ec2_observer("vpc", "describe_vpcs", "Vpcs", "VpcId"),
            note="no delete for drift: a VPC deleted out of band took everything in it",
        ),
        K(
            "subnet",
            "aws_subnet",
            NET,
            DEL_NET,
            "subnet-public/subnet-private",
            p.ec2_observer("subnet", "describe_subnets", "Subnets", "SubnetId"),
            p.ec2_deleter("delete_subnet", "SubnetId"),
        ),
        K(
            "internet-gateway",
            "aws_internet_gateway",
            NET,
            DEL_NET,
            "igw",
            p.ec2_observer("internet-gateway", "describe_internet_gateways", "InternetGateways", "InternetGatewayId"),
        ),
        K(
            "elastic-ip",
            "aws_eip",
            NET,
            DEL_NET,
            "nat-eip",
            p.ec2_observer("elastic-ip", "describe_addresses", "Addresses", "AllocationId"),
            p.ec2_deleter("release_address", "AllocationId"),
        ),
        K(
            "nat-gateway",
            "aws_nat_gateway",
            NET,
            DEL_NET,
            "nat",
            p.ec2_observer(
                "nat-gateway", "describe_nat_gateways", "NatGateways", "NatGatewayId", p.nat_fields, LIVE_NAT
            ),
            p.ec2_deleter("delete_nat_gateway", "NatGatewayId"),
        ),
        K(
            "route-table",
            "aws_route_table",
            NET,
            DEL_NET,
            "rt-public/rt-private",
            p.ec2_observer(
                "route-table", "describe_route_tables", "RouteTables", "RouteTableId", lambda t: {"routes": p.routes(t)}
            ),
            p.ec2_deleter("delete_route_table", "RouteTableId"),
            note="also the VPC's main route table, tagged vpc-default (it goes with the VPC)",
        ),
        K(
            "route-table-association",
            "aws_route_table_association",
            NET,
            DEL_NET,
            direct=False,
            note="the direct pipeline associates subnets inside its route-table line (part of the route table)",
        ),
        K(
            "default-route-table",
            "aws_default_route_table",
            NET,
            DEL_NET,
            direct=False,
            note="the stack adopts the main route table; the direct pipeline tags it (a route-table, vpc-default)",
        ),
        K(
            "default-network-acl",
            "aws_default_network_acl",
            NET,
            DEL_NET,
            direct=False,
            note="the stack adopts the VPC's default ACL; the direct pipeline only tags it (not read back)",
        ),
        # ---- identity (stepCreateIAM) ----
        K("iam-role", "aws_iam_role", IAM, DEL_IAM, "role", p.observe_roles, note="the VM role and the scheduler's"),
        K("iam-instance-profile", "aws_iam_instance_profile", IAM, DEL_IAM, "role", p.observe_profiles),
        K(
            "iam-policy-attachment",
            "aws_iam_role_policy_attachment",
            IAM,
            DEL_IAM,
            note="the exec channel's managed policy on the VM role (part of the role)",
        ),
        K(
            "iam-role-policy",
            "aws_iam_role_policy",
            IAM,
            DEL_IAM,
            note="the scheduler role's inline policy; the VM role's vmplane-secrets (drift reads it back)",
        ),
        # ---- security groups, launch templates (stepCreateLaunchTemplate; the LB's group: stepCreateLoadBalancer) ----
        K(
            "security-group",
            "aws_security_group",
            LT,
            DEL_SG,
            "vm-sg",
            p.ec2_observer("security-group", "describe_security_groups", "SecurityGroups", "GroupId", p.group_fields),
            p.ec2_deleter("delete_security_group", "GroupId"),
            note="the VM group, the LB's (lb-sg), and the VPC's default group (vpc-default), emptied of rules",
        ),
        K(
            "security-group-ingress-rule",
            "aws_vpc_security_group_ingress_rule",
            LT,
            DEL_SG,
            note="a rule of a group: read with the group (its `ingress` field)",
        ),
        K(
            "security-group-egress-rule",
            "aws_vpc_security_group_egress_rule",
            LT,
            DEL_SG,
            direct=False,
            note="the stack writes the groups' allow-all egress as a rule; EC2 makes it with the group",
        ),
        K(
            "default-security-group",
            "aws_default_security_group",
            NET,
            DEL_NET,
            direct=False,
            note="the stack adopts the default group; the direct pipeline empties it (a security-group, vpc-default)",
        ),
        K(
            "launch-template",
            "aws_launch_template",
            LT,
            DEL_LT,
            "launch-template",
            p.ec2_observer("launch-template", "describe_launch_templates", "LaunchTemplates", "LaunchTemplateId"),
            p.ec2_deleter("delete_launch_template", "LaunchTemplateId"),
        ),
        # ---- VMs and schedules (stepCreateVMs) ----
        K(
            "instance",
            "aws_instance",
            VMS,
            DEL_VMS,
            "vm",
            p.ec2_observer(
                "instance", "describe_instances", "Reservations", "InstanceId", p.instance_fields, LIVE_INSTANCE
            ),
            p.ec2_deleter("terminate_instances", "InstanceIds", as_list=True),
            note="Fixed pools' VMs; an auto scaling group's members carry the job's tags too (not planned)",
        ),
        K(
            "volume",
            "aws_ebs_volume",
            VMS,
            DEL_VMS,
            "volume",
            p.ec2_observer("volume", "describe_volumes", "Volumes", "VolumeId"),
            in_stack=False,
            direct=False,
            note="a VM's root disk, made by RunInstances (and by the stack's aws_instance) with it",
        ),
        K(
            "network-interface",
            "aws_network_interface",
            VMS,
            DEL_VMS,
            "vm-eni",
            p.ec2_observer(
                "network-interface", "describe_network_interfaces", "NetworkInterfaces", "NetworkInterfaceId"
            ),
            in_stack=False,
            direct=False,
            note="a VM's interface, made by RunInstances (and by the stack's aws_instance) with it",
        ),
        K(
            "auto-scaling-group",
            "aws_autoscaling_group",
            VMS,
            DEL_VMS,
            "vm",
            p.observe_scaling_groups,
            p.delete_scaling_group,
        ),
        K(
            "scaling-policy",
            "aws_autoscaling_policy",
            VMS,
            DEL_VMS,
            direct=False,
            note="the direct pipeline puts the target-tracking policy with its group (the group's plan line)",
        ),
        K(
            "scheduled-action",
            "aws_autoscaling_schedule",
            VMS,
            DEL_VMS,
            None,
            p.observe_scheduled_actions,
            note="takes no tags: found by the names of the job's pools on the job's groups",
        ),
        K("schedule-group", "aws_scheduler_schedule_group", VMS, DEL_VMS, "schedule-group", p.observe_schedule_groups),
        K(
            "schedule",
            "aws_scheduler_schedule",
            VMS,
            DEL_VMS,
            None,
            p.observe_schedules,
            note="takes no tags: those in the job's schedule group",
        ),
        K(
            "ssm-parameter",
            "aws_ssm_parameter",
            VMS,
            DEL_VMS,
            direct=False,
            note="the stack keeps the runtime settings in SSM; the direct pipeline pushes them over the exec channel",
        ),
        # ---- load balancer ----
        K(
            "load-balancer",
            "aws_lb",
            LB,
            DEL_LB,
            "lb",
            p.observe_load_balancers,
            p.elb_deleter("delete_load_balancer", "LoadBalancerArn"),
        ),
        K(
            "target-group",
            "aws_lb_target_group",
            TG,
            DEL_LB,
            "target-group",
            p.observe_target_groups,
            p.elb_deleter("delete_target_group", "TargetGroupArn"),
        ),
        K(
            "target-group-attachment",
            "aws_lb_target_group_attachment",
            TG,
            DEL_LB,
            direct=False,
            note="a Fixed VM registered with the target group (its `targets` field)",
        ),
        K(
            "listener",
            "aws_lb_listener",
            LISTENER,
            DEL_LB,
            "listener",
            p.observe_listeners,
            p.elb_deleter("delete_listener", "ListenerArn"),
        ),
        K(
            "certificate",
            "aws_acm_certificate",
            IAM,
            DEL_LB,
            "certificate",
            p.observe_certificates,
            p.delete_certificate,
            note="requested beside the identity in a provision (certs.py), by the LB step in an attach",
        ),
        K(
            "certificate-validation",
            "aws_acm_certificate_validation",
            LISTENER,
            DEL_LB,
            direct=False,
            note="the stack waits for the certificate in a resource; the direct pipeline waits in stepCreateListener",
        ),
        K(
            "dns-record",
            "aws_route53_record",
            DNS,
            DEL_LB,
            None,
            p.observe_dns_records,
            note="takes no tags: the records the job lists (the alias and the certificate's validation record)",
        ),
    ),
)

# What drift reports as `extra` when nothing expects it: every kind found by the job's tags, but a VM's
# disk and interface (they come and go with it) and what takes no tags (found through the record).
EXTRA_KINDS = frozenset(
    k.kind
    for k in TABLE.kinds
    if k.observe is not None and k.kind not in ("volume", "network-interface", "dns-record", "scheduled-action")
)
# The kinds EC2 describes by tag (retag re-tags them in batches of CreateTags).
EC2_KINDS = (
    "instance",
    "vpc",
    "subnet",
    "internet-gateway",
    "nat-gateway",
    "elastic-ip",
    "route-table",
    "security-group",
    "launch-template",
    "volume",
    "network-interface",
)
