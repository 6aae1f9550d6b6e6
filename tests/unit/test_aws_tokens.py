"""Every idempotency token the AWS driver sends is unique per request and within the API's limit (a
digest, never a cut), checked against botocore's own model, on the longest names the spec allows."""

from __future__ import annotations

import re

import botocore.session
import pytest
from moto import settings as moto_settings

from vmplane.clouds.aws import certs, network, repair, rotation, tokens
from vmplane.clouds.aws.driver import AwsDriver
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.session import AwsTarget
from vmplane.clouds.drift import Drift, DriftChange
from vmplane.envspec.models import EnvSpec
from vmplane.jobs.service import new_job_id, spec_json

from .support import REGION, make_ctx, variant

LONGEST = "a" + "b" * 30 + "c"  # a DNS label of 32 characters: the longest org, env and pool name
MAX_VMS = 100  # FixedPool.size's maximum


def _documented_limit(service: str, operation: str, member: str) -> int:
    """The limit botocore states for a token: `max` when the model has it, else the documented text
    ("Maximum 64 ASCII characters"), since EC2's ClientToken members carry no `max`."""
    shape = botocore.session.get_session().get_service_model(service).operation_model(operation)
    token = shape.input_shape.members[member]
    if "max" in token.metadata:
        return int(token.metadata["max"])
    found = re.search(r"Maximum (\d+) ASCII characters", token.documentation)
    assert found, f"{service}.{operation}.{member}: no limit documented"
    return int(found.group(1))


def test_the_documented_limits_are_the_ones_the_helper_uses():
    assert _documented_limit("ec2", "RunInstances", "ClientToken") == tokens.RUN_INSTANCES_LIMIT
    assert _documented_limit("ec2", "CreateLaunchTemplate", "ClientToken") == tokens.LAUNCH_TEMPLATE_LIMIT
    assert _documented_limit("ec2", "CreateNatGateway", "ClientToken") == tokens.NAT_GATEWAY_LIMIT


def test_run_instances_tokens_on_the_longest_names_are_distinct_and_fit():
    """Old `client_token`: `token[:64]` with no suffix, so every VM of a long pool shared one token."""
    job = new_job_id()
    limit = _documented_limit("ec2", "RunInstances", "ClientToken")
    names = [f"{LONGEST}-{LONGEST}-{i}" for i in range(MAX_VMS)]  # naming.instance_name's shape
    sent = [tokens.run_instances_token(job, n) for n in names]
    sent += [tokens.run_instances_token(job, n, tokens.rotation_suffix(2, 0)) for n in names]  # a rotation
    # The same version of a template made again after a deletion (its versions count from 1 again).
    sent += [tokens.run_instances_token(job, n, tokens.rotation_suffix(2, 1)) for n in names]
    sent += [tokens.run_instances_token(job, n, "-after-i-0123456789abcdef0") for n in names]  # a relaunch
    assert len(set(sent)) == len(sent)
    assert all(len(t) <= limit and t.isascii() and t.isprintable() for t in sent)
    # Deterministic: a resumed step sends the token the crashed one sent.
    assert tokens.run_instances_token(job, names[7]) == sent[7]


def test_short_tokens_are_the_ones_vmplane_always_sent():
    """A job resumed across the upgrade must send the token its launch was first sent with."""
    assert tokens.run_instances_token("job-20261203-0a1b2c3d", "demo-web-0") == "job-20261203-0a1b2c3d-demo-web-0"
    assert tokens.launch_template_token("job-1", "web") == "job-1-lt-web"
    assert tokens.nat_gateway_token("job-1", 0) == "job-1-nat-0"


def test_launch_template_and_nat_tokens_fit_and_differ():
    job = new_job_id()
    lt_limit = _documented_limit("ec2", "CreateLaunchTemplate", "ClientToken")
    pools = [f"{LONGEST[:-3]}{i:03d}" for i in range(50)]
    lts = [tokens.launch_template_token(job, p) for p in pools]
    assert len(set(lts)) == len(lts) and all(len(t) <= lt_limit for t in lts)
    nats = [tokens.nat_gateway_token(job, n) for n in range(5)]
    assert len(set(nats)) == 5 and all(
        len(t) <= _documented_limit("ec2", "CreateNatGateway", "ClientToken") for t in nats
    )


def test_a_digest_never_a_cut():
    long = "x" * 200
    token = tokens.idempotency_token(long, "1", limit=64)
    other = tokens.idempotency_token(long, "2", limit=64)
    assert len(token) == 64 and token != other and not long.startswith(token)
    with pytest.raises(ValueError, match="printable ASCII"):
        tokens.idempotency_token("ünïcode", limit=64)


def test_the_issues_example_gives_every_launch_its_own_token(aws, spec):
    """Issue 25: env `payments-reconciliation-staging`, pool `background-workers`. The old driver sent
    `f"{job_id}-{name}"[:64]`: both VMs (and no suffix survived for them) had one token, so on AWS the
    second launch got the first VM's instance back; moto ignored it and made two."""
    spec = EnvSpec.model_validate(
        {
            **spec_json(spec),
            "name": "payments-reconciliation-staging",
            "pools": {"background-workers": {"mode": "fixed", "size": 2}},
        }
    )
    job = new_job_id()
    driver = AwsDriver(AwsTarget(region=REGION))
    ctx = make_ctx(spec, job_id=job)
    aws_ids(ctx.infra).InstanceProfileArn = "arn:aws:iam::123456789012:instance-profile/vmplane-x-vm"
    sent: list[str] = []

    def track(model, params, **_):
        if model.name == "RunInstances":
            sent.append(params["ClientToken"])

    driver.aws.ec2.meta.events.register("before-parameter-build.ec2.RunInstances", track)
    for step in (driver.preflight, driver.network.ensure, driver.pools.ensure_templates, driver.pools.ensure_vms):
        step(ctx)
    ctx = make_ctx(variant(ctx.spec, bootstrap={"mode": "bare"}), ctx.infra, job_id=job)  # a new version
    driver.pools.ensure_templates(ctx)
    rotation.rotate_fixed_vm(driver.aws, ctx, ctx.infra.VMs[0], health_timeout=60)
    assert len(sent) == 3 and len(set(sent)) == 3
    assert all(len(t) <= _documented_limit("ec2", "RunInstances", "ClientToken") for t in sent)


def test_a_forgotten_nat_gateway_is_followed_by_a_new_token_once(spec):
    """The old driver sent `{job}-nat-0` again after a failed gateway: AWS answers that token with the
    failed gateway, so the resumed step would wait on it again. A re-run after the save bumps nothing."""
    ctx = make_ctx(spec)
    aws_ids(ctx.infra).NatGatewayIDs = ["nat-0123456789abcdef0"]
    before = tokens.nat_gateway_token(ctx.job_id, aws_ids(ctx.infra).NatAttempt)
    network.forget_nat(ctx)
    network.forget_nat(ctx)  # the re-run after a crash that followed the save
    assert aws_ids(ctx.infra).NatAttempt == 1 and aws_ids(ctx.infra).NatGatewayIDs == []
    assert tokens.nat_gateway_token(ctx.job_id, aws_ids(ctx.infra).NatAttempt) != before


def test_a_launch_template_deleted_out_of_band_is_made_again_under_a_new_token(aws, spec):
    """The old driver sent `{job}-lt-{pool}` again when repair made a deleted template anew: AWS answers
    a used token with the template it first made (deleted now); moto ignored the token."""
    driver = AwsDriver(AwsTarget(region=REGION))
    ctx = make_ctx(spec)
    aws_ids(ctx.infra).InstanceProfileArn = "arn:aws:iam::123456789012:instance-profile/vmplane-acme-demo-fixed-vm"
    sent: list[str] = []
    driver.aws.ec2.meta.events.register(
        "before-parameter-build.ec2.CreateLaunchTemplate", lambda params, **_: sent.append(params["ClientToken"])
    )
    for step in (driver.preflight, driver.network.ensure, driver.pools.ensure_templates):
        step(ctx)
    old = ctx.infra.LaunchTemplateID["web"]
    driver.aws.ec2.delete_launch_template(LaunchTemplateId=old)
    repair._forget_template(
        driver.aws, ctx, Drift("aws_launch_template.web", "launch-template", old, DriftChange.missing)
    )
    driver.pools.ensure_templates(ctx)
    assert len(sent) == 2 and sent[0] != sent[1] and ctx.infra.LaunchTemplateID["web"] != old
    assert sent[0] == tokens.launch_template_token(ctx.job_id, "web")  # the first one as vmplane always sent it


def test_the_acm_token_is_within_its_model_and_new_per_request(aws, spec, monkeypatch):
    """ACM's IdempotencyToken is `\\w+`, 1..32 (botocore's model): certs.py saves a random hex token first,
    so a resumed request sends it again and a request after a detach sends a new one."""
    monkeypatch.setattr(moto_settings, "ACM_VALIDATION_WAIT", 0)
    member = botocore.session.get_session().get_service_model("acm").operation_model("RequestCertificate")
    meta = member.input_shape.members["IdempotencyToken"].metadata
    sent: list[str] = []
    driver = AwsDriver(AwsTarget(region=REGION))
    driver.aws.acm.meta.events.register(
        "before-parameter-build.acm.RequestCertificate", lambda params, **_: sent.append(params["IdempotencyToken"])
    )
    ctx = make_ctx(variant(spec, loadBalancer={"domain": "app.example.test"}))
    certs.request(driver.aws, ctx)
    aws_ids(ctx.infra).CertificateReady, aws_ids(ctx.infra).CertificateRequestToken = False, None  # a detach
    driver.aws.acm.delete_certificate(CertificateArn=str(aws_ids(ctx.infra).CertificateArn))
    certs.request(driver.aws, ctx)
    assert len(sent) == 2 and sent[0] != sent[1]
    assert all(meta["min"] <= len(t) <= meta["max"] and re.fullmatch(meta["pattern"], t) for t in sent)
