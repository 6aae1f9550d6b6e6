"""clouds/registry.py and clouds/azure.py: which driver serves a target, and Azure's clean `Invalid`."""

from __future__ import annotations

from dataclasses import replace

import pytest

from vmplane.clouds.aws.driver import AwsDriver
from vmplane.clouds.azure import AzureDriver
from vmplane.clouds.base import CloudDriver, capability_problems, runtime_script_problem
from vmplane.clouds.errors import CloudError, ProviderInvalidError, UnsupportedError
from vmplane.clouds.interfaces.composition import create_identity, delete_identity
from vmplane.clouds.registry import FACTORIES, driver_for
from vmplane.envspec.models import Cloud, ExecMode
from vmplane.pipeline.plan import KNOWN_STEPS
from vmplane.pipeline.steps import step_dependencies
from vmplane.target import Target

from .support import make_ctx, variant

SANDBOX = "http://127.0.0.1:4566"


def test_aws_target_gets_the_aws_driver_with_the_same_endpoint():
    driver = driver_for(Target(cloud=Cloud.aws, region="eu-west-1", endpoint_url=SANDBOX))
    assert isinstance(driver, AwsDriver)
    assert driver.target.region == "eu-west-1" and driver.target.endpoint_url == SANDBOX
    assert driver.target.sandbox


def test_target_for_spec_never_carries_a_profile_into_the_sandbox(spec):
    with_profile = variant(spec, provider={"profile": "prod-admin"})
    assert Target.for_spec(with_profile, SANDBOX).profile is None
    assert Target.for_spec(with_profile, SANDBOX).sandbox
    real = Target.for_spec(with_profile, None)
    assert real.profile == "prod-admin" and not real.sandbox
    assert real.describe() == "aws (us-east-1)"
    assert Target.for_spec(spec, SANDBOX).describe() == f"sandbox at {SANDBOX} (us-east-1)"


def test_azure_preflight_is_a_clean_invalid(spec):
    azure = variant(spec, provider={"cloud": "azure", "region": "westeurope"}, exec={"mode": "AzureRunCmd"})
    driver = driver_for(Target.for_spec(azure, None))
    assert isinstance(driver, AzureDriver)
    with pytest.raises(ProviderInvalidError) as caught:
        driver.preflight(make_ctx(azure))
    assert caught.value.args[0].startswith("Invalid")
    assert str(caught.value).startswith("Invalid: Azure")
    assert caught.value.code == "Invalid"
    assert not caught.value.retryable


PROVISION_CALLS = {
    "network.ensure": lambda d, c: d.network.ensure(c),
    "identity": lambda d, c: create_identity(d, c),
    "pools.ensure_templates": lambda d, c: d.pools.ensure_templates(c),
    "pools.ensure_vms": lambda d, c: d.pools.ensure_vms(c),
}


@pytest.mark.parametrize("call", sorted(PROVISION_CALLS))
def test_every_azure_provisioning_call_is_invalid(spec, call):
    with pytest.raises(ProviderInvalidError, match=r"^Invalid"):
        PROVISION_CALLS[call](AzureDriver(), make_ctx(spec))


def test_azure_teardown_has_nothing_to_do(spec):
    driver, ctx = AzureDriver(), make_ctx(spec)
    assert driver.pools.delete_vms(ctx) is None
    assert driver.pools.delete_templates(ctx) is None
    assert driver.network.delete_firewall(ctx) is None
    assert delete_identity(driver, ctx) is None
    assert driver.network.delete(ctx) is None
    assert driver.inventory.leftovers(ctx) == []


def test_proxmox_target_gets_the_proxmox_driver_with_endpoint_nodes_and_tls():
    from vmplane.clouds.proxmox.driver import ProxmoxDriver

    target = Target(
        cloud=Cloud.proxmox, region="pve1,pve2", api_endpoint="https://pve.example:8006", ca_file="/etc/pve-ca.pem"
    )
    driver = driver_for(target)
    assert isinstance(driver, ProxmoxDriver)
    assert driver.target.endpoint == "https://pve.example:8006" and driver.target.nodes == ("pve1", "pve2")
    assert (driver.target.ca_file, driver.target.verify_tls) == ("/etc/pve-ca.pem", True)
    assert not driver.target.loopback  # the crash tests' hook stays off for a real cluster


def test_the_sandbox_does_not_emulate_proxmox():
    match = "the sandbox emulates AWS and Google Cloud only; a Proxmox environment needs a Proxmox VE API"
    with pytest.raises(UnsupportedError, match=match):
        driver_for(Target(cloud=Cloud.proxmox, region="pve1", endpoint_url=SANDBOX))


def test_gcp_target_gets_the_gcp_driver_with_project_region_and_endpoint():
    from vmplane.clouds.gcp.driver import GcpDriver

    target = Target(cloud=Cloud.gcp, region="us-central1", project="acme-prod", endpoint_url="http://127.0.0.1:4567")
    driver = driver_for(target)
    assert isinstance(driver, GcpDriver)
    assert (driver.target.project, driver.target.region) == ("acme-prod", "us-central1")
    assert driver.target.endpoint_url == "http://127.0.0.1:4567" and driver.target.sandbox
    assert not driver_for(target.model_copy(update={"endpoint_url": None})).target.sandbox


def test_azure_on_the_sandbox_answers_invalid(spec):
    # The Azure stub calls nothing, so it needs no sandbox: on the sandbox too a job gets the clean
    # `Invalid` answer, not the sandbox's "emulates AWS only".
    driver = driver_for(Target(cloud=Cloud.azure, region="westeurope", endpoint_url=SANDBOX))
    with pytest.raises(CloudError, match=r"^Invalid"):
        driver.preflight(make_ctx(spec))


@pytest.mark.parametrize("cloud", sorted(FACTORIES))
def test_every_registered_driver_instantiates_and_implements_the_whole_base(cloud):
    # An ABC with a missing method cannot be instantiated: this is what keeps AttributeError out of a job.
    driver = driver_for(Target(cloud=cloud, region="somewhere"))
    assert isinstance(driver, CloudDriver) and driver.cloud is cloud
    assert not getattr(type(driver), "__abstractmethods__", frozenset())
    caps = driver.capabilities
    assert caps.pool_modes and caps.exec_modes and caps.exec_payload_bytes > 0 and caps.user_data_bytes > 0
    assert set(step_dependencies(driver)) <= KNOWN_STEPS


def test_a_driver_without_a_method_cannot_be_built():
    class Partial(AzureDriver):
        pass

    del_method = "delete_network"
    Partial.__abstractmethods__ = frozenset({del_method})  # what a forgotten override looks like
    with pytest.raises(TypeError, match=del_method):
        Partial()


def test_unsupported_operations_raise_a_typed_error_not_attribute_error(spec):
    driver = AzureDriver()
    with pytest.raises(UnsupportedError, match="rotating VMs: not supported by the azure driver"):
        driver.pools.rotate(make_ctx(spec), "web")
    with pytest.raises(UnsupportedError, match="interactive sessions"):
        driver.exec_channel.session_hint("vm-1")
    assert driver.lb.detach(make_ctx(spec), keep_vms=True) is None  # nothing to remove


def test_capabilities_refuse_what_a_driver_cannot_do_naming_the_field(spec):
    caps = replace(
        AwsDriver.capabilities,
        pool_modes=frozenset({"fixed"}),
        load_balancers=False,
        exec_modes=frozenset({ExecMode.OSConfig}),
    )
    asking = variant(
        spec,
        pools={"batch": {"mode": "asg", "min": 1, "max": 2, "desired": 1}},
        loadBalancer={"domain": "app.example.com"},
    )
    problems = capability_problems(asking, caps, Cloud.aws)
    assert problems == [
        "pools.batch.mode: 'asg' pools are not supported on aws",
        "loadBalancer: aws has no load balancer vmplane can create",
        "exec.mode: SSM is not an exec channel of aws",
    ]
    assert capability_problems(spec, AwsDriver.capabilities, Cloud.aws) == []


def test_runtime_settings_too_large_for_the_exec_channel_are_refused_before_anything_is_created(spec):
    big = variant(spec, runtime={"files": {"/etc/app/blob.txt": "x" * 60_000}})
    problems = capability_problems(big, AwsDriver.capabilities, Cloud.aws)
    assert len(problems) == 1 and problems[0].startswith("runtime: the settings make a ")
    assert "more than the exec channel's 48 KB" in problems[0]
    assert runtime_script_problem(spec, AwsDriver.capabilities.exec_payload_bytes) is None


@pytest.mark.parametrize("cloud", [Cloud.aws, Cloud.gcp, Cloud.proxmox])
def test_every_starter_passes_its_drivers_capability_check(cloud):
    # `vmplane init --cloud` and the dashboard's starters must give a file the driver would run (the GCP
    # starter once named debian-12, whose images do not run cloud-init, and was refused).
    from vmplane.envspec.load import parse_spec_text
    from vmplane.envspec.starter import render_starter

    spec = parse_spec_text(render_starter("shop", "acme", cloud=cloud), "starter.jsonc")
    assert driver_for(Target.for_spec(spec, None)).validate(spec) == []
