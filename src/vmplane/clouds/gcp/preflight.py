"""stepValidate's cloud half; creates nothing: the project answers, the region and its zones, each
pool's image resolves, each machine type exists, no name the job would create is someone else's, and
Google's agent may start and stop VMs where a Fixed pool has a schedule, and every referenced secret exists
with an enabled version (metadata only: its value is the VM's to read)."""

from __future__ import annotations

from functools import partial

from vmplane.clouds.base import Context
from vmplane.clouds.errors import InvalidRequestError, NotFoundError
from vmplane.clouds.gcp import conflicts, schedules
from vmplane.clouds.gcp.ids import gcp_ids
from vmplane.clouds.gcp.images import lookup_image
from vmplane.clouds.gcp.network import pick_zones
from vmplane.clouds.gcp.secrets import GcpSecretAccess
from vmplane.clouds.gcp.session import CALL_TIMEOUT, GcpClients
from vmplane.envspec.secrets import secret_refs


def preflight(gcp: GcpClients, ctx: Context) -> None:
    spec, infra = ctx.spec, ctx.infra
    ids = gcp_ids(infra)
    projects = gcp.crm.projects()
    try:
        project = gcp.call("cloudresourcemanager.projects.get", lambda: projects.get(projectId=gcp.project).execute())
    except NotFoundError as e:
        raise InvalidRequestError(f"provider.project: project {gcp.project} not found or not visible") from e
    region = spec.provider.region
    regions = gcp.compute("Regions")
    try:
        gcp.call("compute.regions.get", lambda: regions.get(project=gcp.project, region=region, timeout=CALL_TIMEOUT))
    except NotFoundError as e:
        raise InvalidRequestError(f"provider.region: {region} is not a region of {gcp.project}") from e
    ids.Project, infra.Region, infra.ExecMode = gcp.project, region, spec.exec_mode.value
    # After the project answered: a wrong project is that one problem, not one per secret.
    GcpSecretAccess(gcp).refuse_unreadable(secret_refs(spec))
    infra.Zones = pick_zones(gcp, region, spec.network.zones)

    images: dict[str, str] = {}
    for pool_name, pool in spec.pools.items():
        try:
            found = lookup_image(gcp, pool.image)
        except InvalidRequestError as e:
            raise InvalidRequestError(f"pools.{pool_name}.image: {e}") from e
        images[pool_name] = str(found.self_link)
        check_disk_size(pool_name, pool.disk_gb, pool.image, int(found.disk_size_gb or 0))
    ids.Images = images

    types = gcp.compute("MachineTypes")
    for pool_name, pool in spec.pools.items():
        mt = pool.instance_type
        for zone in infra.Zones:  # a pool spreads over every zone the network uses
            try:
                gcp.call(
                    "compute.machineTypes.get",
                    partial(types.get, project=gcp.project, zone=zone, machine_type=mt, timeout=CALL_TIMEOUT),
                )
            except (NotFoundError, InvalidRequestError) as e:  # a name of another cloud's form is a 400
                raise InvalidRequestError(f"pools.{pool_name}.instanceType: {mt} is not offered in {zone}") from e
    conflicts.check_names(gcp, ctx)  # before any step creates something under these names
    schedules.check_service_agent(gcp, ctx, str(project.get("projectNumber", "")))
    ctx.save()
    ctx.log(f"project {gcp.project}, zones {', '.join(infra.Zones)}, images resolved")


def check_disk_size(pool_name: str, disk_gb: int, image: str, image_gb: int) -> None:
    """Google refuses a boot disk smaller than its image ("Requested disk size cannot be smaller than the
    image size"), and only when the instance template's VMs are created: refused here, before anything is."""
    if image_gb and disk_gb < image_gb:
        raise InvalidRequestError(
            f"pools.{pool_name}.diskGb: {disk_gb} GB is smaller than the image {image} ({image_gb} GB); "
            f"set diskGb to {image_gb} or more"
        )
