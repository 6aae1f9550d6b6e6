"""The GCP driver's identity and stepValidate on the GCP sandbox, called directly with a Context built
as pipeline/runner.py builds one, and checked by reading the sandbox with google-api-python-client and
google-cloud-compute (not vmplane's code): exactly two roles on the service account, nobody else's
binding touched, teardown leaves neither account nor binding; preflight creates nothing and refuses
names someone else holds, naming the owner."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import Sandbox

from vmplane.clouds.base import API_CALLS, Context, Tagger
from vmplane.clouds.errors import ConflictError, InvalidRequestError
from vmplane.clouds.gcp import identity, naming, ownership, preflight
from vmplane.clouds.gcp.session import GcpClients, GcpTarget
from vmplane.envspec.load import load_spec
from vmplane.envspec.models import EnvSpec
from vmplane.state import InfraConfig

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ALICE = "user:alice@example.com"


def gcp_spec(project: str, **changes: Any) -> EnvSpec:
    data = load_spec(EXAMPLES / "gcp-web.jsonc").model_dump(mode="json", by_alias=True, exclude_none=True)
    data["provider"]["project"] = project
    for key, value in changes.items():
        data[key] = {**data.get(key, {}), **value} if isinstance(value, dict) else value
    return EnvSpec.model_validate(data)


def context(spec: EnvSpec, job_id: str = "job-gcp-infra-1") -> Context:
    return Context(job_id=job_id, spec=spec, infra=InfraConfig(), tagger=Tagger.for_spec(spec, job_id))


def clients(sandbox: Sandbox, spec: EnvSpec) -> GcpClients:
    p = spec.provider
    return GcpClients(GcpTarget(project=p.project, region=p.region, endpoint_url=sandbox.gcp_endpoint))


def run(fn: Any, gcp: GcpClients, ctx: Context) -> Counter[str]:
    tally: Counter[str] = Counter()
    token = API_CALLS.set(tally)
    try:
        fn(gcp, ctx)
    finally:
        API_CALLS.reset(token)
    return tally


def fresh_project() -> str:
    return f"infra-{uuid.uuid4().hex[:10]}"


def project_policy(sandbox: Sandbox, project: str) -> dict[str, Any]:
    crm = sandbox.gcp_discovery("cloudresourcemanager")
    return dict(crm.projects().getIamPolicy(resource=project, body={}).execute())


def roles_of(policy: dict[str, Any], member: str) -> list[str]:
    return sorted(b["role"] for b in policy.get("bindings", []) if member in b.get("members", []))


def test_the_service_account_gets_exactly_two_roles_and_teardown_leaves_nothing(sandbox: Sandbox) -> None:
    project = fresh_project()
    spec = gcp_spec(project)
    gcp, ctx = clients(sandbox, spec), context(spec)
    crm, iam = sandbox.gcp_discovery("cloudresourcemanager"), sandbox.gcp_discovery("iam")
    # Someone else's bindings, on one of our roles and on another: they must survive both directions.
    before = project_policy(sandbox, project)
    before["bindings"] = [
        *before.get("bindings", []),
        {"role": "roles/logging.logWriter", "members": [ALICE]},
        {"role": "roles/viewer", "members": [ALICE]},
    ]
    crm.projects().setIamPolicy(resource=project, body={"policy": before}).execute()

    first = run(identity.ensure_identity, gcp, ctx)
    assert first["iam.projects.serviceAccounts.create"] == 1
    email = naming.service_account_email(spec, project)
    sa = iam.projects().serviceAccounts().get(name=f"projects/{project}/serviceAccounts/{email}").execute()
    assert ownership.owned_by(sa, ctx.tagger)
    assert json.loads(sa["description"])["zop:role"] == "service-account"
    policy = project_policy(sandbox, project)
    assert roles_of(policy, f"serviceAccount:{email}") == sorted(identity.ROLES)
    assert roles_of(policy, ALICE) == ["roles/logging.logWriter", "roles/viewer"]

    again = run(identity.ensure_identity, gcp, ctx)  # a re-run converges without writing anything
    assert again["iam.projects.serviceAccounts.create"] == 0
    assert again["cloudresourcemanager.projects.setIamPolicy"] == 0

    run(identity.delete_identity, gcp, ctx)
    accounts = iam.projects().serviceAccounts().list(name=f"projects/{project}").execute().get("accounts", [])
    assert email not in [a["email"] for a in accounts]
    policy = project_policy(sandbox, project)
    assert email not in json.dumps(policy)  # neither the live nor the deleted:...?uid= form remains
    assert roles_of(policy, ALICE) == ["roles/logging.logWriter", "roles/viewer"]
    run(identity.delete_identity, gcp, ctx)  # already gone: done, not an error


def sandbox_state(sandbox: Sandbox, project: str) -> dict[str, Any]:
    state = sandbox.gcp_control(f"state?project={project}", method="GET")
    return {k: state.get(k) for k in ("compute", "iam")}


def test_preflight_records_zones_and_images_and_creates_nothing(sandbox: Sandbox) -> None:
    project = fresh_project()
    spec = gcp_spec(project)
    gcp, ctx = clients(sandbox, spec), context(spec)
    before = sandbox_state(sandbox, project)
    tally = run(preflight.preflight, gcp, ctx)
    assert sandbox_state(sandbox, project) == before
    assert not [m for m in tally if m.rsplit(".", 1)[-1] in ("insert", "create", "patch", "delete", "setIamPolicy")]
    assert ctx.infra.Zones == sorted(ctx.infra.Zones) and len(ctx.infra.Zones) == spec.network.zones
    assert all(z.startswith(f"{spec.provider.region}-") for z in ctx.infra.Zones)
    image = ctx.infra.Cloud.model_dump()["Images"]["web"]
    assert "/projects/ubuntu-os-cloud/global/images/ubuntu-2404-" in image


def test_preflight_refuses_names_someone_else_holds_naming_the_owner(sandbox: Sandbox) -> None:
    from google.cloud import compute_v1

    project = fresh_project()
    spec = gcp_spec(project)
    gcp, ctx = clients(sandbox, spec), context(spec)
    other = Tagger.for_spec(spec, "job-someone-else")
    nets = sandbox.gcp_compute(compute_v1.NetworksClient)
    nets.insert_unary(
        project=project,
        network_resource=compute_v1.Network(
            name=naming.network(spec),
            auto_create_subnetworks=False,
            description=ownership.description(other, "network"),
        ),
    )
    fws = sandbox.gcp_compute(compute_v1.FirewallsClient)
    fws.insert_unary(
        project=project,
        firewall_resource=compute_v1.Firewall(
            name=naming.firewall(spec, "health"),
            network=f"projects/{project}/global/networks/{naming.network(spec)}",
            description="made by hand",
            allowed=[compute_v1.Allowed(I_p_protocol="tcp", ports=["80"])],
            source_ranges=["10.0.0.0/8"],
        ),
    )
    before = sandbox_state(sandbox, project)
    with pytest.raises(ConflictError) as caught:
        preflight.preflight(gcp, ctx)
    msg = str(caught.value)
    assert f"network {naming.network(spec)} already exists and belongs to org acme, job job-someone-else" in msg
    assert f"firewall rule {naming.firewall(spec, 'health')} already exists and belongs to not vmplane" in msg
    assert sandbox_state(sandbox, project) == before

    # The same names under this job's own description are a resume, not a conflict.
    ours = context(spec, job_id="job-someone-else")
    fws.delete_unary(project=project, firewall=naming.firewall(spec, "health"))
    preflight.preflight(gcp, ours)


@pytest.mark.parametrize(
    ("pool", "field"),
    [
        ({"image": "projects/no-such-images/global/images/nope"}, "pools.web.image"),
        ({"image": "debian-9000"}, "pools.web.image"),
        ({"instanceType": "e2-imaginary"}, "pools.web.instanceType"),
    ],
)
def test_preflight_refuses_an_image_or_machine_type_that_does_not_resolve(sandbox: Sandbox, pool, field) -> None:
    project = fresh_project()
    spec = gcp_spec(project, pools={"web": {**gcp_spec(project).pools["web"].model_dump(by_alias=True), **pool}})
    with pytest.raises(InvalidRequestError, match=field.replace(".", r"\.")):
        preflight.preflight(clients(sandbox, spec), context(spec))


def test_a_tag_change_reaches_the_service_accounts_description(sandbox: Sandbox) -> None:
    spec = gcp_spec(fresh_project())
    gcp, ctx = clients(sandbox, spec), context(spec)
    run(identity.ensure_identity, gcp, ctx)
    email = ctx.infra.Cloud.model_dump()["ServiceAccountEmail"]
    ctx.spec = spec.model_copy(update={"tags": {"team": "payments"}})
    ctx.tagger = Tagger.for_spec(ctx.spec, ctx.job_id)
    from vmplane.clouds.gcp import retag

    calls = run(retag.retag, gcp, ctx)
    assert calls["iam.projects.serviceAccounts.patch"] == 1
    sas = sandbox.gcp_discovery("iam").projects().serviceAccounts()
    got = sas.get(name=f"projects/{spec.provider.project}/serviceAccounts/{email}").execute()
    tags = json.loads(got["description"])
    assert tags["team"] == "payments" and "costCenter" not in tags and tags["zop:jobId"] == ctx.job_id
    assert run(retag.retag, gcp, ctx)["iam.projects.serviceAccounts.patch"] == 0  # converged
    run(identity.delete_identity, gcp, ctx)
