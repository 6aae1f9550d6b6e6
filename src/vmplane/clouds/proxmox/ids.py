"""The Proxmox driver's own part of InfraConfig (`InfraConfig.Cloud`).

Neutral fields carry the seed's meaning: `NetworkID` is the bridge the VMs' NICs attach to (the SDN
VNet vmplane made, or an existing bridge/VNet, then `NetworkCreated` is False), `VMSubnetIDs` the SDN
subnet, `VMSecurityGroupID` the cluster firewall security group, `VMRecord.ID` the VMID (a string) and
`VMRecord.AZ` the node it runs on. Everything else is here.
"""

from __future__ import annotations

from pydantic import Field

from vmplane.state import CloudInfra, InfraConfig


class ProxmoxInfra(CloudInfra):
    Kind: str = "proxmox"
    # One PVE pool per environment: every VM joins it (ownership, and a permission boundary)
    Pool: str | None = None
    PoolCreated: bool = False
    # SDN (only when vmplane made the network)
    Zone: str | None = None
    ZoneCreated: bool = False
    VNet: str | None = None
    VNetCreated: bool = False
    Subnet: str | None = None  # PVE's subnet id, `<zone>-<network>-<prefix>`
    SubnetCidr: str | None = None
    Gateway: str | None = None
    SubnetCreated: bool = False
    # Firewall
    SecurityGroup: str | None = None
    SecurityGroupCreated: bool = False
    SourceCidrs: list[str] = Field(default_factory=list)  # what "inside the network" means for the group's rules
    # Templates: pool -> (node, VMID) of the template VM its VMs are cloned from
    TemplateNode: dict[str, str] = Field(default_factory=dict)
    TemplateVmid: dict[str, int] = Field(default_factory=dict)
    # Cloud-init: VM name -> the NoCloud ISO's volume id (`local:iso/vmplane-<vmid>-cidata.iso`)
    Isos: dict[str, str] = Field(default_factory=dict)
    IsoStorage: str | None = None  # the file storage holding them (content `iso`)
    # VMID -> node, for VMs whose clone was started (intent before the clone call)
    Vmids: dict[str, str] = Field(default_factory=dict)
    # ---- pve-net ----
    # SDN changes vmplane made (creates or deletes) that `PUT /cluster/sdn` has not applied yet: a step
    # killed between a change and the apply applies on its re-run, though every object is then found.
    SdnPending: bool = False
    # The cluster firewall was off at stepValidate (VM rules then do nothing; vmplane never turns it on).
    ClusterFirewallOff: bool = False


def pve_ids(infra: InfraConfig) -> ProxmoxInfra:
    """The Proxmox ids of a job, upgraded in place from the neutral record on first use."""
    return infra.cloud_ids(ProxmoxInfra)
