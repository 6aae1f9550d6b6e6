"""The AWS sandbox's extras: moto's behaviour patched where AWS acts differently after a request is accepted
(the catalogue refuses requests; these change what happens to accepted ones). Installed once per
process by `install()` (serve.py, and tests that serve the strict layer in-process).

- ACM: a DNS-validated certificate stays PENDING_VALIDATION until each domain's validation CNAME exists
  in a Route 53 zone of the same account; then it is ISSUED (moto issues after a fixed wait and never
  looks at the record). AWS takes minutes after the record appears; the sandbox issues at the next read.
- NAT: a public NAT gateway in a VPC with no internet gateway attached ends `failed` with
  Gateway.NotAttached (moto makes it `available`).
- SSM: the public Ubuntu 24.04 amd64 image parameter exists (moto has only Amazon Linux's); it points at
  the Ubuntu image moto holds, which is not 24.04: the sandbox cannot run the real image.
- ELB: a resource takes 50 tags by AddTags, as on AWS (moto stops at 10).
- Auto Scaling: a scheduled action's name is unique per group, as on AWS (moto keys them by name
  alone, so a second group's action of the same name replaced the first's).
"""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

_lock = threading.Lock()
_installed = False
UBUNTU_2404_PARAMETER = "/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id"
_UBUNTU_AMI = "ami-785db401"  # moto's own Ubuntu image (16.04): the sandbox has no 24.04 image
_ACM_RECORD_PREFIX = "_d930b28be6c5927595552b219965053e"  # moto's validation record name (acm/models.py)


def install() -> None:
    global _installed
    with _lock:
        if _installed:
            return
        _acm()
        _nat()
        _ssm()
        _elb_tags()
        _scheduled_actions()
        _installed = True


def _norm(name: str) -> str:
    return name.rstrip(".").lower()


def validation_records(cert: Any) -> list[str]:
    """The CNAME names moto gives a certificate's domains (describe's DomainValidationOptions)."""
    names = set(cert.sans + ([cert.common_name] if cert.common_name else []))
    return sorted(f"{_ACM_RECORD_PREFIX}.{n[2:] if n.startswith('*.') else n}" for n in names)


def _record_exists(account: str, name: str) -> bool:
    from moto.backends import get_backend

    zones = get_backend("route53")[account]["global"].zones.values()
    return any(_norm(r.name) == _norm(name) and r.type == "CNAME" for z in zones for r in z.rrsets)


def _acm() -> None:
    from moto.acm.models import CertBundle

    original = CertBundle.check

    def check(self: CertBundle) -> None:
        if self.type == "AMAZON_ISSUED" and self.status == "PENDING_VALIDATION":
            account = self.arn.split(":")[4]
            if all(_record_exists(account, name) for name in validation_records(self)):
                self.status = "ISSUED"
            return  # moto's own wait never issues it
        original(self)

    CertBundle.check = check  # type: ignore[method-assign]


def _nat() -> None:
    from moto.ec2.models.nat_gateways import NatGatewayBackend

    original = NatGatewayBackend.create_nat_gateway

    def create_nat_gateway(self: Any, *args: Any, **kwargs: Any) -> Any:
        gateway = original(self, *args, **kwargs)
        if getattr(gateway, "connectivity_type", "public") != "private":
            attached = any(g.vpc is not None and g.vpc.id == gateway.vpc_id for g in self.internet_gateways.values())
            if not attached:
                gateway.state = "failed"
                # moto's NatGateway has no failure fields; its response serializer reads these names.
                setattr(gateway, "failure_code", "Gateway.NotAttached")  # noqa: B010
                setattr(gateway, "failure_message", f"Network {gateway.vpc_id} has no Internet gateway attached")  # noqa: B010
        return gateway

    NatGatewayBackend.create_nat_gateway = create_nat_gateway  # type: ignore[method-assign]


def _ssm() -> None:
    from moto.ssm.models import Parameter, ParameterDict

    original = ParameterDict._check_loading_status

    def check_loading_status(self: ParameterDict, key: str) -> None:
        original(self, key)
        if str(key or "").startswith("/aws/service/canonical/") and not dict.__contains__(self, UBUNTU_2404_PARAMETER):
            dict.__setitem__(
                self,
                UBUNTU_2404_PARAMETER,
                [
                    Parameter(  # type: ignore[abstract]
                        account_id=self.account_id, name=UBUNTU_2404_PARAMETER, value=_UBUNTU_AMI,
                        parameter_type="String", description=None, allowed_pattern=None, keyid=None,
                        last_modified_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC), version=1, data_type="aws:ec2:image",
                    )
                ],
            )  # fmt: skip

    ParameterDict._check_loading_status = check_loading_status  # type: ignore[method-assign]


def _elb_tags() -> None:
    from moto.elbv2.exceptions import TooManyTagsError
    from moto.elbv2.models import ELBv2Backend

    def add_tags(self: Any, resource_arns: list[str], tags: list[dict[str, str]]) -> None:
        tag_dict = self.tagging_service.flatten_tag_list(tags)
        for arn in resource_arns:
            existing = self.tagging_service.get_tag_dict_for_resource(arn)
            if len(set(existing) | set(tag_dict)) > 50:
                raise TooManyTagsError()
            self._get_resource_by_arn(arn)
            self.tagging_service.tag_resource(arn, tags)

    ELBv2Backend.add_tags = add_tags  # type: ignore[method-assign]


def _scheduled_actions() -> None:
    from moto.autoscaling.exceptions import ValidationError
    from moto.autoscaling.models import AutoScalingBackend

    original = AutoScalingBackend.put_scheduled_update_group_action

    def put(self: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        action = original(self, name, *args, **kwargs)
        # moto stored it under its name alone: keep it under (group, name) instead.
        self.scheduled_actions.pop(action.scheduled_action_name, None)
        self.scheduled_actions[f"{name}\x00{action.scheduled_action_name}"] = action
        return action

    def delete(self: Any, auto_scaling_group_name: str, scheduled_action_name: str) -> None:
        if self.scheduled_actions.pop(f"{auto_scaling_group_name}\x00{scheduled_action_name}", None) is None:
            raise ValidationError("Scheduled action name not found")

    AutoScalingBackend.put_scheduled_update_group_action = put  # type: ignore[method-assign]
    AutoScalingBackend.delete_scheduled_action = delete  # type: ignore[method-assign]
