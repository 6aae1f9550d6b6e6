"""The VMs: a regional instance template per pool, Fixed instances, regional managed instance groups.

Every VM gets the same hardening, written out on each template and instance (not read from a local) so
policy checks see it: no external address, OS Login with project-wide SSH keys blocked, no serial port,
Shielded VM, the environment's own service account.
"""

from __future__ import annotations

from vmplane.envspec.models import EnvSpec
from vmplane.tf import vmconfig_files
from vmplane.tf.gcp import schedules
from vmplane.tf.gcp.common import BASE, OWNER, E, description, labels
from vmplane.tf.hcl import Block, Comment, Item, Value


def metadata(user_data: str) -> dict[str, Value]:
    return {
        # OS Login: who may log in is decided by IAM, and keys in project metadata are ignored.
        "enable-oslogin": "TRUE",
        "block-project-ssh-keys": "TRUE",
        "serial-port-enable": "FALSE",
        # The bootstrap reports its progress through guest attributes; OS Config is the exec channel.
        "enable-guest-attributes": "TRUE",
        "enable-osconfig": "TRUE",
        "user-data": E(user_data),
    }


def _harden(b: Block) -> None:
    """What a template and a Fixed instance share after their disk: network, identity, Shielded VM."""
    b.attr("can_ip_forward", False)
    # No access_config block: the VM has no external address; egress goes through Cloud NAT.
    b.block("network_interface").attr("subnetwork", E("google_compute_subnetwork.vms.id"))
    sa = b.block("service_account").attr("email", E("google_service_account.vm.email"))
    # The broad scope is Google's recommendation with a dedicated account: its IAM roles are the limit.
    sa.attr("scopes", ["cloud-platform"])
    shielded = b.block("shielded_instance_config")
    shielded.attr("enable_secure_boot", True).attr("enable_vtpm", True).attr("enable_integrity_monitoring", True)


def compute(spec: EnvSpec) -> list[Item]:
    lb = spec.load_balancer is not None
    fixed = any(p.mode == "fixed" for p in spec.pools.values())
    asg = any(p.mode == "asg" for p in spec.pools.values())
    out: list[Item] = [Comment("---- VMs: instance templates, Fixed instances, managed instance groups ----")]
    # Regional, as the direct pipeline makes them (clouds/gcp/templates.py): one scope for both, so the
    # plan's addresses, the sandbox's resources and the stack's agree (clouds/gcp/resources.py).
    tmpl = Block("resource", ["google_compute_region_instance_template", "pool"])
    tmpl.attr("for_each", E("local.vm.pools"))
    tmpl.attr("region", E("local.identity.provider.region"))
    # Templates are immutable: a change makes a new one (a new name) before the old one goes.
    # At most 37 characters (the provider appends a unique suffix): env-pool cut to 27, 8 hex of org/env/pool.
    short = 'substr("${local.identity.name}-${each.key}", 0, 27)'
    tmpl.attr("name_prefix", E(f'"${{{short}}}-${{substr(sha1("{OWNER}/${{each.key}}"), 0, 8)}}-"'))
    tmpl.attr("description", description("instance template"))
    tmpl.attr("machine_type", E("each.value.instanceType"))
    tmpl.attr("tags", E("[local.vm_tag]"))
    tmpl.attr("labels", labels("vm"))
    tmpl.attr("metadata", metadata("local.user_data[each.key]"))
    disk = tmpl.block("disk")
    disk.attr("source_image", E("local.images[each.key]")).attr("disk_size_gb", E("each.value.diskGb"))
    disk.attr("disk_type", "pd-balanced").attr("boot", True).attr("auto_delete", True)
    disk.attr("labels", labels("volume"))
    _harden(tmpl)
    vmconfig_files.precondition(tmpl.block("lifecycle").attr("create_before_destroy", True))
    out.append(tmpl)
    if schedules.fixed_scheduled(spec) or schedules.asg_scheduled(spec):
        out.append(schedules.schedule_locals())
    if schedules.fixed_scheduled(spec):
        out += schedules.resource_policy()
    if fixed:
        out += _fixed(lb, schedules.fixed_scheduled(spec))
    if asg:
        out += _groups(lb, schedules.asg_scheduled(spec))
    return out


def _fixed(lb: bool, scheduled: bool) -> list[Item]:
    inst = Block("resource", ["google_compute_instance", "vm"])
    inst.attr("for_each", E("local.fixed_vms"))
    inst.attr("name", E("each.key"))
    inst.attr("description", description("vm"))
    # VM i of a pool goes to zone i mod zones, as on the other clouds.
    inst.attr("zone", E("local.zone_names[each.value.index % local.zones]"))
    inst.attr("machine_type", E("local.vm.pools[each.value.pool].instanceType"))
    inst.attr("tags", E("[local.vm_tag]"))
    inst.attr("labels", labels("vm"))
    inst.attr("metadata", metadata("local.user_data[each.value.pool]"))
    boot = inst.block("boot_disk").attr("auto_delete", True)
    init = boot.block("initialize_params")
    init.attr("image", E("local.images[each.value.pool]"))
    init.attr("size", E("local.vm.pools[each.value.pool].diskGb")).attr("type", "pd-balanced")
    init.attr("labels", labels("volume"))
    _harden(inst)
    if scheduled:
        inst.attr("resource_policies", E(schedules.instance_policies()))
    inst.comment("checkov:skip=CKV_GCP_38:disks use Google-managed encryption; CSEK would put raw keys in state")
    inst.comment(
        "A new instance template does not replace running VMs: replace them one at a time with\n"
        "`vmplane rotate`, or `terraform apply -replace='google_compute_instance.vm[\"NAME\"]'` per VM."
    )
    inst.block("lifecycle").attr("ignore_changes", E('[metadata["user-data"], machine_type, boot_disk]'))
    out: list[Item] = [inst]
    if lb:
        # The backend service takes instance groups; unmanaged groups are zonal, so one per pool and zone.
        groups = Block("resource", ["google_compute_instance_group", "fixed"])
        groups.attr(
            "for_each",
            E(
                "merge([\n"
                "    for name, p in local.cloud.pools : {\n"
                '      for z in range(min(p.size, local.zones)) : "${name}-${z}" => { pool = name, zone = z }\n'
                '    } if local.identity.pools[name].mode == "fixed"\n'
                "  ]...)"
            ),
        )
        groups.attr("name", E(f'"{BASE}-${{each.key}}"'))
        groups.attr("description", description("instance group"))
        groups.attr("zone", E("local.zone_names[each.value.zone]"))
        groups.attr("network", E("google_compute_network.this.id"))
        groups.attr(
            "instances",
            E(
                "[\n"
                "    for k, v in local.fixed_vms : google_compute_instance.vm[k].self_link\n"
                "    if v.pool == each.value.pool && v.index % local.zones == each.value.zone\n"
                "  ]"
            ),
        )
        groups.block("named_port").attr("name", "http").attr("port", E("local.lb.targetPort"))
        out.append(groups)
    return out


def _groups(lb: bool, scheduled: bool) -> list[Item]:
    mig = Block("resource", ["google_compute_region_instance_group_manager", "pool"])
    mig.attr("for_each", E("local.asg_pools"))
    mig.attr("name", E(f'"{BASE}-${{each.key}}"'))
    mig.attr("description", description("instance group"))
    mig.attr("region", E("local.identity.provider.region"))
    mig.attr("base_instance_name", E('"${local.identity.name}-${each.key}"'))
    mig.attr("distribution_policy_zones", E("local.zone_names"))
    # The autoscaler owns the size after creation; desired is the size the group starts with.
    mig.attr("target_size", E("each.value.desired"))
    mig.block("version").attr("instance_template", E("google_compute_region_instance_template.pool[each.key].id"))
    mig.block("named_port").attr("name", "http").attr("port", E("local.lb.targetPort") if lb else 80)
    mig.block("all_instances_config").attr("labels", labels("vm"))
    if lb:
        heal = mig.block("auto_healing_policies").attr("health_check", E("google_compute_health_check.this.id"))
        # A VM is not judged before its bootstrap may have finished (GCP allows at most an hour).
        heal.attr("initial_delay_sec", E("min(local.cloud.bootstrap.timeoutSeconds, 3600)"))
    policy = mig.block("update_policy")
    # Pinned: the group does not roll by itself (OPPORTUNISTIC); running VMs move to a new template when
    # vmplane rotates them, though VMs the group creates meanwhile (scale-out, healing) already use it.
    policy.attr("type", E('try(each.value.pinTemplateVersion, false) ? "OPPORTUNISTIC" : "PROACTIVE"'))
    policy.attr("minimal_action", "REPLACE")
    # A regional group's fixed surge is 0 or at least its zone count: one extra VM per zone, none removed first.
    policy.attr("max_surge_fixed", E("local.zones"))
    policy.attr("max_unavailable_fixed", 0)
    mig.block("lifecycle").attr("ignore_changes", E("[target_size]"))
    scaler = Block("resource", ["google_compute_region_autoscaler", "pool"])
    scaler.attr("for_each", E("local.asg_pools"))
    scaler.attr("name", E(f'"{BASE}-${{each.key}}"'))
    scaler.attr("description", description("autoscaler"))
    scaler.attr("region", E("local.identity.provider.region"))
    scaler.attr("target", E("google_compute_region_instance_group_manager.pool[each.key].id"))
    auto = scaler.block("autoscaling_policy")
    # A scheduled pool may go to 0 outside its hours; its scaling schedule holds min during them.
    low = "try(local.schedule_cron[each.key], null) == null ? each.value.min : 0" if scheduled else "each.value.min"
    auto.attr("min_replicas", E(low)).attr("max_replicas", E("each.value.max"))
    auto.attr("cooldown_period", E("min(local.cloud.bootstrap.timeoutSeconds, 3600)"))
    # GCP's autoscaler always follows a signal; without targetCpuPercent it is GCP's own default, 60 %.
    auto.block("cpu_utilization").attr("target", E("try(each.value.targetCpuPercent, 60) / 100"))
    if scheduled:
        schedules.scaling_schedule(auto)
    return [mig, scaler]
