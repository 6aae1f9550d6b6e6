"""InfraConfig: what a job has built, kept in the job's `config.infra` JSON.

The neutral field names are the documented ones (`VMs`, `VMSecurityGroupID`, `LoadBalancerID`, `ScalingGroupID`,
`LaunchTemplateID`, `ExistingResourceGroup`, `BootstrapNginxReady`). vmplane supports several pools per
environment, so the per-pool ones (`ScalingGroupID`, `LaunchTemplateID`) map pool name -> id. Adding a
field is a model extension, not a migration: the whole object is one JSON column.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, model_validator


class VMState(StrEnum):
    pending = "pending"  # intent recorded, instance not confirmed running yet
    bootstrap = "bootstrap"  # running, sentinel not seen yet
    ready = "ready"  # sentinel seen through the exec channel
    failed = "failed"
    stopped = "stopped"  # stopped on purpose (`vmplane stop` or the pool's schedule): not polled, not replaced
    terminated = "terminated"


class StateModel(BaseModel):
    model_config = ConfigDict(extra="allow", validate_assignment=True)


class VMRecord(StateModel):
    Name: str
    Pool: str
    Index: int
    ID: str | None = None
    PrivateIP: str | None = None
    AZ: str | None = None
    SubnetID: str | None = None
    LaunchTemplateVersion: int | None = None
    State: VMState = VMState.pending
    RuntimeHash: str | None = None  # the runtime settings this VM was last given (bootstrap/runtime.py)
    # A rotation in flight: the replacement launched for this record (crash-safe intent).
    ReplacementID: str | None = None


class CloudInfra(StateModel):
    """The cloud's own ids (VPC parts and ARNs on AWS; routers, firewall rules, backend services on GCP).

    The driver of `Kind` owns the fields: it upgrades this base to its own model on first use (see the
    driver's `ids()` accessor), and `extra="allow"` keeps every field through a round trip in between.
    """

    Kind: str = ""


CloudT = TypeVar("CloudT", bound=CloudInfra)

# Records written before the cloud sub-model existed kept these neutral values under AWS names.
_LEGACY_NAMES = {"VpcID": "NetworkID", "VpcCreated": "NetworkCreated", "PrivateSubnetIDs": "VMSubnetIDs"}


class InfraConfig(StateModel):
    # Documented fields (API users read these)
    VMs: list[VMRecord] = Field(default_factory=list)
    # The secret references' versions the last runtime push delivered (ref text -> version id): plan shows
    # a newer one as `old -> new version`. Ids only, never a value.
    SecretVersions: dict[str, str | None] = Field(default_factory=dict)
    VMSecurityGroupID: str | None = None
    LoadBalancerID: str | None = None
    ScalingGroupID: dict[str, str] = Field(default_factory=dict)  # pool -> ASG name / MIG name
    LaunchTemplateID: dict[str, str] = Field(default_factory=dict)  # pool -> template id
    ExistingResourceGroup: str | None = None
    BootstrapNginxReady: bool = False
    # Where and how
    ExecMode: str | None = None
    Region: str | None = None
    Zones: list[str] = Field(default_factory=list)
    # Neutral shape every cloud fills: the network the VMs live in and whether vmplane made it
    NetworkID: str | None = None
    NetworkCreated: bool = False  # False for an existing network: teardown must never touch it
    VMSubnetIDs: list[str] = Field(default_factory=list)
    # The current template version per pool (a VM launched from an older one is outdated)
    LaunchTemplateVersion: dict[str, int] = Field(default_factory=dict)
    LoadBalancerDNSName: str | None = None  # what the domain's record points at
    # Pools `vmplane stop` stopped (Fixed: instances stopped; scaling group: sized to 0) until `vmplane start`;
    # an apply or update keeps them stopped.
    StoppedPools: list[str] = Field(default_factory=list)
    # The cloud's own ids, owned by its driver
    Cloud: SerializeAsAny[CloudInfra] = Field(default_factory=CloudInfra)

    @model_validator(mode="before")
    @classmethod
    def _legacy(cls, data: Any) -> Any:
        if isinstance(data, dict) and "Cloud" not in data and any(k in data for k in _LEGACY_NAMES):
            data = {_LEGACY_NAMES.get(k, k): v for k, v in data.items()}
        return data

    def cloud_ids(self, model: type[CloudT], legacy: dict[str, Any] | None = None) -> CloudT:
        """`Cloud` as the driver's own model, upgraded in place from the neutral record on first use (the
        fields it kept as extras survive). `legacy`: fields an older record kept elsewhere, merged in."""
        if isinstance(self.Cloud, model):
            return self.Cloud
        ids = model.model_validate({**(legacy or {}), **self.Cloud.model_dump(exclude={"Kind"})})
        self.Cloud = ids
        return ids

    def outdated_vms(self) -> list[VMRecord]:
        """Running VMs launched from an older launch template version than their pool's current one."""
        return [
            v
            for v in self.VMs
            if v.ID
            and v.State not in (VMState.terminated, VMState.failed)
            and v.LaunchTemplateVersion is not None
            and v.LaunchTemplateVersion < self.LaunchTemplateVersion.get(v.Pool, v.LaunchTemplateVersion)
        ]

    def vms_to_rotate(self, pool: str) -> list[VMRecord]:
        """The pool's outdated VMs, and those whose rotation a crash interrupted (`ReplacementID` set: finished
        too, whatever the versions say), in index order."""
        outdated = [v for v in self.outdated_vms() if v.Pool == pool]
        resumed = [v for v in self.VMs if v.Pool == pool and v.ReplacementID and v not in outdated]
        return sorted([*outdated, *resumed], key=lambda v: (v.Index, v.Name))

    def created_ids(self) -> list[str]:
        """The neutral fields that record something the job made (or the intent to make it, saved before
        the create): any VM record, its security group, load balancer, scaling groups, launch templates, a
        network it created. Empty for a job that stopped at stepValidate, whose record holds only what it
        looked up (region, zones, account, images, templates). The cloud's own ids are not read here: the
        steps that fill them ran, which `jobs.forget` checks too."""
        held = [f"VMs ({', '.join(v.Name for v in self.VMs)})"] if self.VMs else []
        for name in ("VMSecurityGroupID", "LoadBalancerID", "LoadBalancerDNSName"):
            if (value := getattr(self, name)) is not None:
                held.append(f"{name} {value}")
        for name in ("ScalingGroupID", "LaunchTemplateID"):
            if ids := getattr(self, name):
                held.append(f"{name} ({', '.join(f'{k}={v}' for k, v in sorted(ids.items()))})")
        if self.NetworkCreated and self.NetworkID is not None:
            held.append(f"NetworkID {self.NetworkID}")
        return held

    def vm(self, name: str) -> VMRecord | None:
        return next((v for v in self.VMs if v.Name == name), None)
