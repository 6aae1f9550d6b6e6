"""What the GCP driver refuses before any cloud call, and how its steps are ordered."""

from __future__ import annotations

from tests.helpers import EXAMPLES
from tests.unit.support import variant

from vmplane.clouds.gcp.driver import GcpDriver
from vmplane.clouds.gcp.session import GcpTarget
from vmplane.envspec.load import load_spec
from vmplane.pipeline.plan import waves
from vmplane.pipeline.steps import step_dependencies

DRIVER = GcpDriver(GcpTarget(project="vmplane-sandbox", region="us-central1", endpoint_url="http://127.0.0.1:1"))


def test_the_examples_pass_validation() -> None:
    for name in ("gcp-fixed.jsonc", "gcp-web.jsonc"):
        assert DRIVER.validate(load_spec(EXAMPLES / name)) == []


def test_images_without_cloud_init_are_refused_naming_the_pool() -> None:
    spec = variant(load_spec(EXAMPLES / "gcp-fixed.jsonc"), pools={"web": {"image": "debian-12"}})
    (problem,) = DRIVER.validate(spec)
    assert problem.startswith("pools.web.image: debian-12 comes from debian-cloud") and "cloud-init" in problem
    spec = variant(spec, pools={"web": {"image": "no such image!"}})
    assert DRIVER.validate(spec)[0].startswith("pools.web.image: unknown image")


def test_the_dns_record_waits_for_the_listener_that_makes_the_certificate() -> None:
    order = [
        "stepValidate",
        "stepCreateNetwork",
        "stepCreateIAM",
        "stepCreateLaunchTemplate",
        "stepCreateVMs",
        "stepCreateLoadBalancer",
        "stepCreateTargetGroup",
        "stepCreateListener",
        "stepCreateDNSRecord",
    ]
    plan = waves(order, step_dependencies(DRIVER))
    where = {name: i for i, wave in enumerate(plan) for name in wave}
    assert where["stepCreateDNSRecord"] > where["stepCreateListener"] > where["stepCreateTargetGroup"]
    assert where["stepCreateLoadBalancer"] < where["stepCreateVMs"]  # the frontend is built while VMs boot
