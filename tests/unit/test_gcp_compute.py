"""The GCP compute modules' pure parts: the MIG update policy, template comparison across the forms
Google answers in, template versions from names, the exec answer mapping and script limit."""

from __future__ import annotations

import json

import pytest
from google.cloud import compute_v1 as c

from vmplane.clouds.base import CommandStatus
from vmplane.clouds.errors import InvalidRequestError
from vmplane.clouds.gcp import exec as gcp_exec
from vmplane.clouds.gcp import naming
from vmplane.clouds.gcp.instances import template_version
from vmplane.clouds.gcp.mig import update_policy
from vmplane.clouds.gcp.templates import comparable
from vmplane.envspec.models import EnvSpec


def spec(name: str = "demo") -> EnvSpec:
    return EnvSpec.model_validate(
        {
            "name": name,
            "org": "acme",
            "provider": {"cloud": "gcp", "project": "vmplane-test", "region": "us-central1"},
            "pools": {"web": {"mode": "fixed", "size": 1}},
        }
    )


def test_regional_surge_covers_every_zone_and_nothing_goes_unavailable() -> None:
    policy = update_policy(3)
    assert (policy.type_, policy.minimal_action) == ("PROACTIVE", "REPLACE")
    assert (policy.max_surge.fixed, policy.max_unavailable.fixed) == (3, 0)


def props(machine: str, image: str, labels: dict[str, str]) -> c.InstanceProperties:
    return c.InstanceProperties(
        machine_type=machine,
        disks=[c.AttachedDisk(auto_delete=True, initialize_params=c.AttachedDiskInitializeParams(source_image=image))],
        network_interfaces=[c.NetworkInterface(network="projects/p/global/networks/n")],
        labels=labels,
        metadata=c.Metadata(items=[c.Items(key="user-data", value="#cloud-config")]),
    )


def test_a_template_read_back_with_urls_compares_equal() -> None:
    sent = props("e2-small", "projects/debian-cloud/global/images/debian-12-x", {"a": "b"})
    read = props(
        "e2-small", "https://www.googleapis.com/compute/v1/projects/debian-cloud/global/images/debian-12-x", {"a": "b"}
    )
    read.network_interfaces[0].network = "https://www.googleapis.com/compute/v1/projects/p/global/networks/n"
    assert comparable(read) == comparable(sent)


def test_labels_count_unless_asked_not_to() -> None:
    old, new = props("e2-small", "i", {"team": "a"}), props("e2-small", "i", {"team": "b"})
    assert comparable(old) != comparable(new)
    assert comparable(old, labels=False) == comparable(new, labels=False)
    assert comparable(props("e2-medium", "i", {}), labels=False) != comparable(props("e2-small", "i", {}), labels=False)


def test_template_version_from_a_plain_and_a_digest_shortened_name() -> None:
    assert template_version(spec(), "web", "projects/p/regions/r/instanceTemplates/demo-web-v2", 2) == 2
    long = spec("a" * 32)
    pool = "b" * 30
    name = naming.template(long, pool, 3)
    assert len(name) == 63 and template_version(long, pool, name, 3) == 3
    assert template_version(spec(), "web", "someone-elses", 3) is None


def test_answers_map_to_neutral_statuses() -> None:
    ok = gcp_exec.result_of("vm", json.dumps({"exitCode": 0, "stdout": "x", "stderr": ""}))
    assert (ok.status, ok.ok, ok.stdout) == (CommandStatus.success, True, "x")
    assert gcp_exec.result_of("vm", json.dumps({"exitCode": 3})).status is CommandStatus.failed
    assert gcp_exec.result_of("vm", json.dumps({"exitCode": 124})).status is CommandStatus.timed_out
    assert gcp_exec.result_of("vm", "not json").status is CommandStatus.failed


def test_a_simulated_answer_fakes_no_output_and_says_so() -> None:
    r = gcp_exec.result_of("vm", json.dumps({"exitCode": 0, "stdout": "", "stderr": "", "simulated": True}))
    assert r.ok and r.stdout == "" and r.stderr == gcp_exec.SIMULATED_STDERR


def test_commands_join_into_one_script_within_the_limit() -> None:
    assert gcp_exec.script_of(["a", "b"]) == "a\nb\n"
    with pytest.raises(InvalidRequestError, match="over the exec channel"):
        gcp_exec.script_of(["x" * gcp_exec.MAX_SCRIPT_BYTES])
