"""clouds/gcp LB logic with a fake Google: the managed zone by longest suffix, the A record's ownership
and one-change replacement, the certificate's statuses (a permanent failure names the domain; on the
real cloud a deadline still PROVISIONING succeeds with a note), and detach with nothing recorded."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from vmplane.clouds.base import Context, Tagger
from vmplane.clouds.errors import ConflictError, InvalidRequestError, NotFoundError
from vmplane.clouds.gcp import certs, dns, lb, lb_teardown, naming
from vmplane.clouds.gcp.ids import DnsRecordSet, gcp_ids
from vmplane.envspec.models import EnvSpec, LoadBalancer
from vmplane.state import InfraConfig

JOB = "job-unit-1"


class _Req:
    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn

    def execute(self) -> Any:
        return self.fn()


class FakeDns:
    """Cloud DNS v1's shape, as far as dns.py uses it."""

    def __init__(self, zones: list[dict[str, Any]]) -> None:
        self.zones = zones
        self.rrsets: dict[str, list[dict[str, Any]]] = {z["name"]: [] for z in zones}
        self.changes_made: list[tuple[str, dict[str, Any]]] = []

    def managedZones(self) -> Any:
        def get(project: str, managedZone: str) -> _Req:
            found = next((z for z in self.zones if z["name"] == managedZone), None)
            if found is None:
                raise NotFoundError(f"zone {managedZone}")
            return _Req(lambda: found)

        return SimpleNamespace(
            list=lambda project, pageToken=None: _Req(lambda: {"managedZones": self.zones}),
            get=get,
        )

    def resourceRecordSets(self) -> Any:
        def list_(project: str, managedZone: str, name: str, type: str) -> _Req:
            return _Req(
                lambda: {"rrsets": [r for r in self.rrsets[managedZone] if (r["name"], r["type"]) == (name, type)]}
            )

        return SimpleNamespace(list=list_)

    def changes(self) -> Any:
        def create(project: str, managedZone: str, body: dict[str, Any]) -> _Req:
            def apply() -> dict[str, Any]:
                sets = self.rrsets[managedZone]
                for gone in body.get("deletions", []):
                    sets.remove(gone)  # exact match, as Cloud DNS requires
                sets.extend(body.get("additions", []))
                self.changes_made.append((managedZone, body))
                return {"id": str(len(self.changes_made)), "status": "done"}

            return _Req(apply)

        return SimpleNamespace(create=create)


class FakeGcp:
    def __init__(self, *, sandbox: bool, dns_api: FakeDns | None = None, cert_status: str = "PROVISIONING") -> None:
        self.project, self.region = "acme-prod", "us-central1"
        self.target = SimpleNamespace(sandbox=sandbox)
        self.dns = dns_api
        self.calls: list[str] = []
        self.cert = SimpleNamespace(name="", managed=SimpleNamespace(status=cert_status, domain_status={}, domains=[]))

    def call(self, method: str, fn: Callable[[], Any]) -> Any:
        self.calls.append(method)
        return fn()

    def compute(self, name: str) -> Any:
        assert name == "SslCertificates", name
        return SimpleNamespace(get=lambda **kw: self.cert)


def _spec(domain: str = "shop.example.com", **extra: Any) -> EnvSpec:
    return EnvSpec.model_validate(
        {
            "name": "shop",
            "org": "acme",
            "provider": {"cloud": "gcp", "project": "acme-prod", "region": "us-central1"},
            "pools": {"web": {"mode": "fixed", "size": 1, "instanceType": "e2-small"}},
            "exec": {"mode": "OSConfig"},
            "loadBalancer": {"domain": domain, "certSource": "GCPManaged", **extra},
        }
    )


def _ctx(spec: EnvSpec, infra: InfraConfig | None = None) -> Context:
    saves: list[dict[str, Any]] = []
    infra = infra or InfraConfig()
    ctx = Context(job_id=JOB, spec=spec, infra=infra, tagger=Tagger.for_spec(spec, JOB), log=lambda _m: None)
    ctx.save = lambda: saves.append(infra.model_dump(mode="json"))
    ctx.saves = saves  # type: ignore[attr-defined]
    return ctx


ZONES = [
    {"name": "example", "dnsName": "example.com.", "visibility": "public"},
    {"name": "shop-example", "dnsName": "shop.example.com.", "visibility": "public"},
    {"name": "inner", "dnsName": "api.shop.example.com.", "visibility": "public"},
    {"name": "private-shop", "dnsName": "x.shop.example.com.", "visibility": "private"},
]


def _lb(domain: str, **extra: Any) -> LoadBalancer:
    return LoadBalancer.model_validate({"domain": domain, "certSource": "GCPManaged", **extra})


def test_zone_is_the_longest_public_suffix_of_the_domain() -> None:
    gcp: Any = FakeGcp(sandbox=False, dns_api=FakeDns(ZONES))
    assert dns.resolve_zone(gcp, _lb("shop.example.com")) == "shop-example"
    assert dns.resolve_zone(gcp, _lb("www.shop.example.com")) == "shop-example"
    assert dns.resolve_zone(gcp, _lb("a.x.shop.example.com")) == "shop-example"  # the private zone is skipped
    assert dns.resolve_zone(gcp, _lb("api.shop.example.com")) == "inner"
    with pytest.raises(InvalidRequestError, match=r"^loadBalancer\.domain: .*shop\.example\.org"):
        dns.resolve_zone(gcp, _lb("shop.example.org"))
    with pytest.raises(InvalidRequestError, match=r"loadBalancer\.domain"):
        dns.resolve_zone(gcp, _lb("badexample.com"))  # a suffix must match whole labels


def test_a_given_zone_must_exist_and_hold_the_domain() -> None:
    gcp: Any = FakeGcp(sandbox=False, dns_api=FakeDns(ZONES))
    assert dns.resolve_zone(gcp, _lb("shop.example.com", gcp={"dnsZone": "example"})) == "example"
    with pytest.raises(InvalidRequestError, match=r"loadBalancer\.gcp\.dnsZone: zone inner"):
        dns.resolve_zone(gcp, _lb("shop.example.com", gcp={"dnsZone": "inner"}))
    with pytest.raises(InvalidRequestError, match=r"loadBalancer\.gcp\.dnsZone: no managed zone nope"):
        dns.resolve_zone(gcp, _lb("shop.example.com", gcp={"dnsZone": "nope"}))


def test_a_record_someone_else_wrote_is_refused_and_ours_is_replaced_in_one_change() -> None:
    api = FakeDns(ZONES)
    foreign = {"name": "shop.example.com.", "type": "A", "ttl": 60, "rrdatas": ["198.51.100.7"]}
    api.rrsets["shop-example"].append(dict(foreign))
    gcp: Any = FakeGcp(sandbox=False, dns_api=api)
    ctx = _ctx(_spec())
    with pytest.raises(ConflictError, match=r"198\.51\.100\.7"):
        dns.upsert_a(gcp, ctx, "shop-example", "shop.example.com", "203.0.113.9")
    assert gcp_ids(ctx.infra).DnsRecords == [] and api.changes_made == []

    # The same record listed as ours (an earlier run wrote it): one change deletes it exactly and adds the new.
    gcp_ids(ctx.infra).DnsRecords = [
        DnsRecordSet(Zone="shop-example", Name="shop.example.com.", Type="A", Ttl=60, Rrdatas=["198.51.100.7"])
    ]
    assert dns.upsert_a(gcp, ctx, "shop-example", "shop.example.com", "203.0.113.9") is True
    assert api.changes_made == [
        (
            "shop-example",
            {
                "additions": [{"name": "shop.example.com.", "type": "A", "ttl": 300, "rrdatas": ["203.0.113.9"]}],
                "deletions": [foreign],
            },
        )
    ]
    saved = ctx.saves[-1]["Cloud"]["DnsRecords"]  # type: ignore[attr-defined]
    assert saved == [{"Zone": "shop-example", "Name": "shop.example.com.", "Type": "A", "Ttl": 300,
                      "Rrdatas": ["203.0.113.9"]}]  # fmt: skip
    assert dns.upsert_a(gcp, ctx, "shop-example", "shop.example.com", "203.0.113.9") is False  # converged


@pytest.mark.parametrize("failure", ["FAILED_NOT_VISIBLE", "FAILED_CAA_FORBIDDEN", "FAILED_CAA_CHECKING"])
def test_a_certificate_that_cannot_be_issued_names_the_domain(failure: str) -> None:
    gcp: Any = FakeGcp(sandbox=False)
    gcp.cert.managed.domain_status = {"shop.example.com": failure}
    with pytest.raises(InvalidRequestError, match=rf"loadBalancer\.domain: .*shop\.example\.com.*{failure}"):
        certs.status(gcp, "shop-cert-x", "shop.example.com")


def _ready_for_dns(spec: EnvSpec) -> Context:
    ctx = _ctx(spec, InfraConfig(LoadBalancerDNSName="203.0.113.9"))
    gcp_ids(ctx.infra).Certificate = naming.certificate(spec, "shop.example.com")
    return ctx


def test_on_google_cloud_a_certificate_still_provisioning_at_the_deadline_is_a_note_not_a_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(certs, "CERT_DEADLINE", 0.0)
    gcp: Any = FakeGcp(sandbox=False, dns_api=FakeDns(ZONES))
    ctx = _ready_for_dns(_spec())
    lb.ensure_dns_record(gcp, ctx)
    ids = gcp_ids(ctx.infra)
    assert ids.CertificateStatus == "PROVISIONING" and ids.DnsZone == "shop-example"
    assert len(ctx.notes) == 1
    note = ctx.notes[0]
    assert "HTTPS serves once it is ACTIVE" in note and "gcloud compute ssl-certificates describe" in note
    assert "203.0.113.9" in note


def test_the_production_wait_polls_until_active() -> None:
    gcp: Any = FakeGcp(sandbox=False)
    ctx = _ready_for_dns(_spec())
    sleeps: list[float] = []

    def sleep(s: float) -> None:
        sleeps.append(s)
        if len(sleeps) == 3:
            gcp.cert.managed.status = "ACTIVE"

    assert certs.wait_active(gcp, ctx, "shop.example.com", deadline=3600, sleep=sleep) == "ACTIVE"
    assert sleeps == [0.5, 1.0, 2.0] and gcp_ids(ctx.infra).CertificateStatus == "ACTIVE"


def test_the_sandbox_looks_briefly_and_says_why_it_stays_provisioning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(certs, "SANDBOX_CERT_DEADLINE", 0.0)
    monkeypatch.setattr(certs, "CERT_DEADLINE", 1e9)  # would hang if the sandbox used the production deadline
    logs: list[str] = []
    gcp: Any = FakeGcp(sandbox=True, dns_api=FakeDns(ZONES))
    ctx = _ready_for_dns(_spec())
    ctx.log = logs.append
    lb.ensure_dns_record(gcp, ctx)
    assert ctx.notes == [] and gcp_ids(ctx.infra).CertificateStatus == "PROVISIONING"
    assert any(line.startswith("sandbox: the managed certificate stays PROVISIONING") for line in logs)


def test_detach_with_nothing_recorded_makes_no_call() -> None:
    gcp: Any = FakeGcp(sandbox=False)
    lb_teardown.detach(gcp, _ctx(_spec()), keep_vms=True)
    assert gcp.calls == []
