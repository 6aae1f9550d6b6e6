"""clouds/gcp/conflicts.py and images.py without a cloud: every deterministic name the job would create
is looked up; one that exists and is not this job's is refused naming its owner, ours is a resume."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from vmplane.clouds.base import Tagger
from vmplane.clouds.errors import ConflictError, InvalidRequestError, NotFoundError
from vmplane.clouds.gcp import conflicts, identity, naming, ownership
from vmplane.clouds.gcp.images import image_ref
from vmplane.envspec.load import load_spec

from .support import make_ctx, variant

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ZONES = ["us-central1-a", "us-central1-b"]


class FakeCompute:
    def __init__(self, held: dict[str, Any], client: str, seen: list[tuple[str, str]]) -> None:
        self.held, self.client, self.seen = held, client, seen

    def get(self, project: str, timeout: float, **kw: str) -> Any:
        name = next(v for k, v in kw.items() if k not in ("region", "zone"))
        self.seen.append((self.client, name))
        if name not in self.held:
            raise NotFoundError(f"{name} not found")
        return self.held[name]


class FakeGcp:
    project = "acme-prod"

    def __init__(self, held: dict[str, Any]) -> None:
        self.held, self.seen = held, []

    def compute(self, client: str) -> FakeCompute:
        return FakeCompute(self.held, client, self.seen)

    def call(self, method: str, fn: Any) -> Any:
        return fn()


def resource(name: str, tagger: Tagger | None) -> SimpleNamespace:
    return SimpleNamespace(name=name, description=ownership.description(tagger, "x") if tagger else "made by hand")


@pytest.fixture
def web():
    return load_spec(EXAMPLES / "gcp-web.jsonc")


def ctx_for(spec):
    ctx = make_ctx(spec)
    ctx.infra.Zones = list(ZONES)
    return ctx


def test_every_name_the_steps_create_is_checked(web, monkeypatch):
    monkeypatch.setattr(identity, "get_account", lambda gcp, email: None)
    gcp = FakeGcp({})
    assert conflicts.conflicts(gcp, ctx_for(web)) == []  # type: ignore[arg-type]
    checked = {name for _, name in gcp.seen}
    lb = web.load_balancer
    expected = {
        naming.network(web),
        naming.subnetwork(web),
        naming.router(web),
        *(naming.firewall(web, p) for p in ("vpc", "iap", "health")),
        naming.health_check(web),
        naming.backend_service(web),
        naming.url_map(web),
        naming.redirect_url_map(web),
        naming.certificate(web, lb.domain),
        naming.https_proxy(web),
        naming.http_proxy(web),
        naming.address(web),
        naming.https_rule(web),
        naming.http_rule(web),
    }
    for pool_name, pool in web.pools.items():
        expected.add(naming.template(web, pool_name, 1))
        if pool.mode == "asg":
            expected |= {naming.mig(web, pool_name), naming.autoscaler(web, pool_name)}
        else:
            expected |= {naming.instance(web, pool_name, i) for i in range(pool.size)}
            expected |= {naming.instance_group(web, z) for z in ZONES}
    assert expected <= checked, sorted(expected - checked)


def test_someone_elses_names_are_refused_naming_each_owner_and_ours_are_a_resume(web, monkeypatch):
    ctx = ctx_for(web)
    other = Tagger.for_spec(web, "job-other")
    held = {
        naming.network(web): resource(naming.network(web), other),
        naming.url_map(web): resource(naming.url_map(web), None),
        naming.firewall(web, "vpc"): resource(naming.firewall(web, "vpc"), ctx.tagger),  # ours: a resume
    }
    email = naming.service_account_email(web, FakeGcp.project)
    monkeypatch.setattr(
        identity, "get_account", lambda gcp, e: {"email": e, "description": identity.sa_description(other)}
    )
    with pytest.raises(ConflictError) as caught:
        conflicts.check_names(FakeGcp(held), ctx)  # type: ignore[arg-type]
    msg = str(caught.value)
    assert f"network {naming.network(web)} already exists and belongs to org acme, job job-other" in msg
    assert f"URL map {naming.url_map(web)} already exists and belongs to not vmplane" in msg
    assert f"service account {email} already exists and belongs to org acme, job job-other" in msg
    assert naming.firewall(web, "vpc") not in msg
    assert "change `name`" in msg


def test_an_existing_network_is_not_a_conflict_and_the_next_template_version_is_checked(web, monkeypatch):
    monkeypatch.setattr(identity, "get_account", lambda gcp, email: None)
    network = {"existingVpcId": "shared", "existingPrivateSubnetIds": ["shared-a"]}
    adopted = variant(web, network=network, loadBalancer=None)
    ctx = ctx_for(adopted)
    pool = next(iter(adopted.pools))
    ctx.infra.LaunchTemplateVersion[pool] = 3
    gcp = FakeGcp({naming.network(adopted): resource(naming.network(adopted), None)})
    assert conflicts.conflicts(gcp, ctx) == []  # type: ignore[arg-type]
    names = {n for _, n in gcp.seen}
    assert naming.network(adopted) not in names and naming.template(adopted, pool, 4) in names


@pytest.mark.parametrize(
    ("image", "ref"),
    [
        ("debian-12", ("debian-cloud", "debian-12", True)),
        ("debian-11", ("debian-cloud", "debian-11", True)),
        ("ubuntu-24.04", ("ubuntu-os-cloud", "ubuntu-2404-lts-amd64", True)),
        ("my-images/golden", ("my-images", "golden", True)),
        ("projects/my-images/global/images/golden-v7", ("my-images", "golden-v7", False)),
        (
            "https://www.googleapis.com/compute/v1/projects/my-images/global/images/golden-v7",
            ("my-images", "golden-v7", False),
        ),
    ],
)
def test_image_references(image, ref):
    assert image_ref(image) == ref


def test_an_unknown_image_names_the_accepted_forms():
    with pytest.raises(InvalidRequestError, match=r"debian-12.*projects/<p>/global/images/<name>"):
        image_ref("al2023")
