"""The Proxmox VE privileges vmplane's API token needs, each with the calls that need it (PVE 9 names,
read from PVE's API schema; `PVE8_DIFFERENCES` for PVE 8).

`vmplane proxmox init-node` makes a role with exactly these and a token holding it; stepValidate's
preflight checks the token's effective permissions (`GET /access/permissions`) against them and refuses
naming what is missing. Nothing here is a superset "to be safe": a privilege is listed only if a call
the driver makes is refused without it.
"""

from __future__ import annotations

PRIVILEGES: dict[str, str] = {
    # ---- VMs (on /vms, or the environment's pool) ----
    "VM.Audit": "read a VM's config, status and firewall (GET qemu/{vmid}/config, status/current, firewall/*); "
    "cluster/resources lists only the VMs it covers",
    "VM.Clone": "clone the pool's template (POST qemu/{template}/clone)",
    "VM.Allocate": "create the clone's VMID in the environment's pool (clone with pool=) and destroy it "
    "(DELETE qemu/{vmid} purge=1)",
    "VM.Config.Disk": "resize the clone's disk to diskGb (PUT qemu/{vmid}/resize)",
    "VM.Config.CDROM": "attach the NoCloud cloud-init ISO as a CD-ROM (PUT qemu/{vmid}/config ide3)",
    "VM.Config.CPU": "set cores (PUT qemu/{vmid}/config)",
    "VM.Config.Memory": "set memory (PUT qemu/{vmid}/config)",
    "VM.Config.Network": "net0 on the environment's bridge with firewall=1, and the VM firewall's options and "
    "rules (PUT qemu/{vmid}/config, PUT/POST/DELETE qemu/{vmid}/firewall/*)",
    "VM.Config.Options": "name, tags, description and agent (PUT qemu/{vmid}/config)",
    "VM.PowerMgmt": "start and stop the VMs (POST qemu/{vmid}/status/start|stop)",
    "VM.GuestAgent.Unrestricted": "run commands in the guest: bootstrap checks, runtime push, `vmplane exec` "
    "(POST qemu/{vmid}/agent/exec, GET agent/exec-status)",
    "VM.GuestAgent.FileRead": "read the bootstrap sentinel file (GET qemu/{vmid}/agent/file-read)",
    # ---- storage (on the template's disk storage and the ISO storage) ----
    "Datastore.Audit": "list the ISO storage's content and attach an ISO from it (GET storage/{storage}/content, "
    "the CD-ROM's volume access check); see the nodes' storages in cluster/resources",
    "Datastore.AllocateSpace": "allocate the clone's disks and grow them (clone, resize)",
    "Datastore.AllocateTemplate": "upload the NoCloud ISO as iso content (POST storage/{storage}/upload)",
    "Datastore.Allocate": "delete the uploaded ISOs in teardown (DELETE storage/{storage}/content/{volume}: PVE "
    "asks for Datastore.Allocate on the storage for any non-backup volume)",
    # ---- the environment's pool ----
    "Pool.Allocate": "create, re-comment and delete the environment's pool (POST pools, PUT/DELETE pools/{pool})",
    "Pool.Audit": "read the pool and its members (GET pools/{pool})",
    # ---- SDN ----
    "SDN.Allocate": "create and delete the simple zone, VNet and subnet, and apply them (POST/DELETE "
    "cluster/sdn/zones|vnets|subnets, PUT cluster/sdn)",
    "SDN.Audit": "read the SDN objects (GET cluster/sdn/zones|vnets|subnets) and see them in cluster/resources",
    "SDN.Use": "attach a VM's NIC to the VNet or bridge (PVE checks it on /sdn/zones/<zone>/<vnet>, "
    "`localnetwork` for plain bridges, when net0 is set)",
    # ---- cluster firewall and nodes (on /) ----
    "Sys.Audit": "read the cluster firewall's groups and options, and a node's status and bridges "
    "(GET cluster/firewall/*, nodes/{node}/status, nodes/{node}/network/{iface})",
    "Sys.Modify": "create, change and delete the cluster firewall security group and its rules "
    "(POST/PUT/DELETE cluster/firewall/groups/*; PVE asks for Sys.Modify on /)",
}

# Where each privilege family must be granted (a grant on a parent path with propagate covers it).
ACL_PATHS: dict[str, str] = {
    "VM.": "/vms",
    "Datastore.": "/storage",
    "Pool.": "/pool",
    "SDN.": "/sdn",
    "Sys.": "/",
}

# PVE 8 (before 9.0) had no VM.GuestAgent.* privileges: every guest agent call asked for VM.Monitor,
# which PVE 9 removed. A role for a PVE 8 cluster holds VM.Monitor in their place.
PVE8_DIFFERENCES: dict[str, str] = {
    "VM.GuestAgent.Unrestricted": "VM.Monitor",
    "VM.GuestAgent.FileRead": "VM.Monitor",
}


def acl_path(privilege: str) -> str:
    """The ACL path a privilege must hold on for vmplane's calls (`/` for anything unlisted)."""
    for prefix, path in ACL_PATHS.items():
        if privilege.startswith(prefix):
            return path
    return "/"


def missing(held: dict[str, dict[str, object]], privileges: dict[str, str] | None = None) -> list[str]:
    """The privileges not held where vmplane needs them, given `GET /access/permissions`'s answer
    ({acl path: {privilege: 1}}): a privilege counts on a path if it is held there or on a parent, and
    on PVE 8 its `PVE8_DIFFERENCES` name counts for it."""
    wanted = PRIVILEGES if privileges is None else privileges
    out = []
    for privilege in wanted:
        need = acl_path(privilege)
        names = {privilege, PVE8_DIFFERENCES.get(privilege, privilege)}
        if not any(
            names & set(privs) and (path == "/" or need == path or need.startswith(path.rstrip("/") + "/"))
            for path, privs in held.items()
        ):
            out.append(privilege)
    return out
