"""Regional instance templates, one versioned name per change (stepCreateLaunchTemplate).

Instance templates are immutable, so a pool's template is `<env>-<pool>-v<N>`: the current one is found
by name and its properties compared with the desired ones; a difference makes v<N+1>. Nothing running
is replaced by that (`LaunchTemplateVersion[pool]` bumps, running VMs become outdated, `vmplane rotate`
replaces them), as on AWS.
"""

from __future__ import annotations

from typing import Any

from vmplane.bootstrap.cloudinit import render_user_data
from vmplane.bootstrap.vmconfig import job_manifest
from vmplane.clouds.base import Context
from vmplane.clouds.errors import ConflictError
from vmplane.clouds.gcp import naming, ownership
from vmplane.clouds.gcp.ids import gcp_ids
from vmplane.clouds.gcp.images import resolve_image
from vmplane.clouds.gcp.operations import create, find, last_segment, remove
from vmplane.clouds.gcp.session import CALL_TIMEOUT, GcpClients

DISK_TYPE = "pd-balanced"  # a template names the type; an instance's disk takes it as zones/<zone>/diskTypes/<type>
SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]  # access is the SA's roles, not scopes
# Keys vmplane owns in instance metadata. Guest attributes carry readiness and exec answers; serial
# port access stays off (it would be a login path outside OS Login).
FIXED_METADATA = {
    "enable-oslogin": "TRUE",
    "block-project-ssh-keys": "TRUE",
    "enable-guest-attributes": "TRUE",
    "serial-port-enable": "FALSE",
}


def network_ref(project: str, network: str) -> str:
    return network if "/" in network else f"projects/{project}/global/networks/{network}"


def subnetwork_ref(project: str, region: str, subnetwork: str) -> str:
    return subnetwork if "/" in subnetwork else f"projects/{project}/regions/{region}/subnetworks/{subnetwork}"


def desired_properties(gcp: GcpClients, ctx: Context, pool_name: str) -> Any:
    """The pool's `InstanceProperties`, as the template (and every VM made from it) gets them."""
    from google.cloud import compute_v1 as c

    spec, infra = ctx.spec, ctx.infra
    pool, ids = spec.pools[pool_name], gcp_ids(infra)
    # stepValidate resolves the family on every apply (a newer image makes a new version, like AWS's
    # aliases) and records it; resolved here only when nothing did.
    image = ids.Images.get(pool_name) or resolve_image(gcp, pool.image)
    ids.Images = {**ids.Images, pool_name: image}
    metadata = {
        "user-data": render_user_data(spec, pool_name, job_manifest(spec, pool_name, ctx.vmconfig)),
        **FIXED_METADATA,
    }
    return c.InstanceProperties(
        # The tag set on every VM made from it, MIG members included (what teardown's scan reads).
        description=ownership.description(ctx.tagger, "vm"),
        machine_type=pool.instance_type,
        disks=[
            c.AttachedDisk(
                boot=True,
                auto_delete=True,
                type_="PERSISTENT",
                # Named, not left to Google's default (pd-standard for E2/N2): what the estimate prices and
                # the generated Terraform creates.
                initialize_params=c.AttachedDiskInitializeParams(
                    source_image=image, disk_size_gb=pool.disk_gb, disk_type=DISK_TYPE
                ),
            )
        ],
        # No accessConfigs: no external IP, ever (egress goes through Cloud NAT).
        network_interfaces=[
            c.NetworkInterface(
                network=network_ref(gcp.project, str(infra.NetworkID)),
                subnetwork=subnetwork_ref(gcp.project, gcp.region, infra.VMSubnetIDs[0]),
            )
        ],
        service_accounts=[c.ServiceAccount(email=ids.ServiceAccountEmail, scopes=SCOPES)],
        tags=c.Tags(items=[naming.network_tag(spec)]),
        labels=ownership.labels(ctx.tagger, "vm"),
        shielded_instance_config=c.ShieldedInstanceConfig(
            enable_secure_boot=True, enable_vtpm=True, enable_integrity_monitoring=True
        ),
        metadata=c.Metadata(items=[c.Items(key=k, value=v) for k, v in sorted(metadata.items())]),
    )


def comparable(props: Any, *, labels: bool = True) -> dict[str, Any]:
    """What decides a version, normalised so a template read back compares equal to the one written
    (Google may answer with full URLs where a name was sent)."""
    disk = props.disks[0] if props.disks else None
    nic = props.network_interfaces[0] if props.network_interfaces else None
    out: dict[str, Any] = {
        "machineType": last_segment(props.machine_type or ""),
        "image": _path(disk.initialize_params.source_image) if disk else None,
        "diskSizeGb": int(disk.initialize_params.disk_size_gb) if disk else None,
        "diskType": last_segment(disk.initialize_params.disk_type or "") if disk else None,
        "autoDelete": bool(disk.auto_delete) if disk else None,
        "network": _path(nic.network) if nic else None,
        "subnetwork": _path(nic.subnetwork) if nic else None,
        "accessConfigs": len(nic.access_configs) if nic else 0,
        "metadata": {i.key: i.value for i in props.metadata.items},
        "tags": sorted(props.tags.items),
        "serviceAccounts": sorted((sa.email, tuple(sorted(sa.scopes))) for sa in props.service_accounts),
        "shielded": (
            props.shielded_instance_config.enable_secure_boot,
            props.shielded_instance_config.enable_vtpm,
            props.shielded_instance_config.enable_integrity_monitoring,
        ),
    }
    if labels:
        out["labels"] = dict(props.labels)
    return out


def _path(url: str) -> str:
    """`https://www.googleapis.com/compute/v1/projects/p/global/images/x` -> `projects/p/global/images/x`."""
    _, sep, tail = url.partition("projects/")
    return f"projects/{tail}" if sep else url


def get_template(gcp: GcpClients, name: str) -> Any | None:
    client = gcp.compute("RegionInstanceTemplates")
    return find(
        gcp,
        "compute.regionInstanceTemplates.get",
        lambda: client.get(project=gcp.project, region=gcp.region, instance_template=name, timeout=CALL_TIMEOUT),
    )


def ensure_templates(gcp: GcpClients, ctx: Context) -> None:
    for pool_name in ctx.spec.pools:
        ensure_template(gcp, ctx, pool_name)


def ensure_template(gcp: GcpClients, ctx: Context, pool_name: str) -> int:
    """Make the pool's current template match the spec; returns its version.

    Versions are walked up from the recorded one: an existing template that matches is the current one
    (also the one a crash left unrecorded), one that differs is skipped, and the first free name is
    created. The name is recorded before the insert, so teardown knows it either way."""
    from google.cloud import compute_v1 as c

    spec, infra, ids = ctx.spec, ctx.infra, gcp_ids(ctx.infra)
    want = desired_properties(gcp, ctx, pool_name)
    version = infra.LaunchTemplateVersion.get(pool_name, 1)
    while True:
        name = naming.template(spec, pool_name, version)
        found = get_template(gcp, name)
        if found is None:
            break
        if not ownership.owned_by(found, ctx.tagger):
            raise ConflictError(
                f"instance template {name} exists and belongs to {ownership.owner_of(found, ctx.tagger)}"
            )
        if comparable(found.properties) == comparable(want):
            break
        version += 1
    if found is None:
        ids.Templates = {**ids.Templates, pool_name: _append(ids.Templates.get(pool_name, []), name)}
        ctx.save()  # intent: teardown deletes this name even if the insert's answer is lost
        client = gcp.compute("RegionInstanceTemplates")
        resource = c.InstanceTemplate(
            name=name, description=ownership.description(ctx.tagger, "template"), properties=want
        )
        create(
            gcp,
            "compute.regionInstanceTemplates.insert",
            lambda rid: client.insert_unary(
                request=c.InsertRegionInstanceTemplateRequest(
                    project=gcp.project, region=gcp.region, instance_template_resource=resource, request_id=rid
                ),
                timeout=CALL_TIMEOUT,
            ),
            what=f"instance template {name}",
        )
    ids.Templates = {**ids.Templates, pool_name: _append(ids.Templates.get(pool_name, []), name)}
    infra.LaunchTemplateID = {**infra.LaunchTemplateID, pool_name: name}
    infra.LaunchTemplateVersion = {**infra.LaunchTemplateVersion, pool_name: version}
    _carry_label_only_changes(gcp, ctx, pool_name, version, want)
    ctx.save()
    ctx.log(f"instance template {name} (v{version}){' created' if found is None else ''}")
    return version


def _append(names: list[str], name: str) -> list[str]:
    return names if name in names else [*names, name]


def _carry_label_only_changes(gcp: GcpClients, ctx: Context, pool_name: str, version: int, want: Any) -> None:
    """VMs made from a version that differs from the current one only in labels are not outdated (labels
    are re-applied in place by stepUpdateTags), as on AWS. Decided from the templates' contents, so a
    crash between the insert and the save converges too."""
    older = sorted(
        {
            v.LaunchTemplateVersion
            for v in ctx.infra.VMs
            if v.Pool == pool_name and v.LaunchTemplateVersion is not None and v.LaunchTemplateVersion != version
        }
    )
    target = comparable(want, labels=False)
    same = set()
    for old in older:
        found = get_template(gcp, naming.template(ctx.spec, pool_name, old))
        if found is not None and comparable(found.properties, labels=False) == target:
            same.add(old)
    for vm in ctx.infra.VMs:
        if vm.Pool == pool_name and vm.LaunchTemplateVersion in same:
            vm.LaunchTemplateVersion = version
    if same:
        ctx.log(f"pool {pool_name}: v{', v'.join(map(str, sorted(same)))} differ from v{version} only in labels")


# ---- teardown -------------------------------------------------------------------------------------


def delete_templates(gcp: GcpClients, ctx: Context) -> None:
    """Every recorded template and every regional template named with the env's prefix that is this
    job's (a crash may leave one unrecorded). A template a MIG still uses is retried as in use."""
    ids = gcp_ids(ctx.infra)
    client = gcp.compute("RegionInstanceTemplates")
    names = {n for names in ids.Templates.values() for n in names}
    listed = gcp.call(
        "compute.regionInstanceTemplates.list",
        lambda: list(client.list(project=gcp.project, region=gcp.region, timeout=CALL_TIMEOUT)),
    )
    prefix = naming.prefix(ctx.spec)
    names |= {t.name for t in listed if t.name.startswith(prefix) and ownership.owned_by(t, ctx.tagger)}
    for name in sorted(names):
        remove(
            gcp,
            "compute.regionInstanceTemplates.delete",
            lambda n=name: client.delete_unary(  # type: ignore[misc]
                project=gcp.project, region=gcp.region, instance_template=n, timeout=CALL_TIMEOUT
            ),
            what=f"delete instance template {name}",
        )
    ids.Templates = {}
    ctx.infra.LaunchTemplateID, ctx.infra.LaunchTemplateVersion = {}, {}
    ctx.save()
    ctx.log(f"deleted {len(names)} instance templates")
