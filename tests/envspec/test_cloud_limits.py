"""`vmplane validate` refuses what the cloud would refuse, at the file's line and field.

Before these rules the files below validated, and the first apply met the cloud's refusal halfway
through (the sandboxes accepted them, so no test saw it)."""

from __future__ import annotations

import json
from pathlib import Path

import botocore.session
import pytest

from vmplane.clouds.aws import naming as aws_naming
from vmplane.clouds.aws import spec as aws_spec
from vmplane.clouds.base import Tagger
from vmplane.clouds.gcp import naming as gcp_naming
from vmplane.clouds.gcp import spec as gcp_spec
from vmplane.clouds.proxmox import spec as pve_spec
from vmplane.clouds.tags import proxmox_tags
from vmplane.envspec import cloudlimits
from vmplane.envspec.base import Cloud
from vmplane.envspec.load import SpecError, SpecIssue, load_spec, parse_spec_text
from vmplane.envspec.starter import render_starter

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PROVIDERS = {
    "aws": {"cloud": "aws", "region": "us-east-1"},
    "gcp": {"cloud": "gcp", "project": "shop-prod-1", "region": "us-central1"},
    "proxmox": {"cloud": "proxmox", "endpoint": "https://pve.example:8006", "node": "pve1"},
}
LONGEST = "a" + "b" * 30 + "c"  # the longest DNS label the spec allows (32)


def spec_text(cloud: str, **fields: object) -> str:
    """A small file, one member per line, so an issue's line names the member."""
    pool: dict[str, object] = {"mode": "fixed", "size": 2}
    if cloud == "proxmox":
        pool["proxmox"] = {"template": 9000}
    members = {"name": "demo", "org": "acme", "provider": PROVIDERS[cloud], "pools": {"web": pool}, **fields}
    body = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in members.items())
    return "{\n" + body + "\n}\n"


def refused(cloud: str, **fields: object) -> SpecIssue:
    text = spec_text(cloud, **fields)
    with pytest.raises(SpecError) as exc:
        parse_spec_text(text, "env.jsonc")
    (issue,) = exc.value.issues
    key = next(iter(fields))
    # At the member's own line (one member per line, after name/org/provider/pools).
    assert issue.line == 1 + 4 + list(fields).index(key) + 1, (issue, text)
    return issue


def accepted(cloud: str, **fields: object) -> None:
    parse_spec_text(spec_text(cloud, **fields), "env.jsonc")


# -- AWS -----------------------------------------------------------------------------------------


def test_aws_a_tag_prefix_of_aws_is_refused_in_any_case():
    """Old: tagPrefix "aws:" validated; every key vmplane adds would then be reserved (AWS refuses)."""
    for prefix in ("aws:", "AWS:", "Aws:x/"):
        issue = refused("aws", tagPrefix=prefix)
        assert (
            issue.path == "tagPrefix" and "AWS reserves" in issue.message and "InvalidParameterValue" in issue.message
        )
    accepted("gcp", tagPrefix="aws:")  # on GCP it is just part of a label key


@pytest.mark.parametrize("key, value", [("team", "a,b"), ("team", "x;y"), ("cost#center", "cc"), ("note", "50%")])
def test_aws_tag_characters_outside_awss_pattern_are_refused(key, value):
    """Old: only the length and the aws: prefix were checked; ELB/ACM/IAM refuse these characters."""
    issue = refused("aws", tags={key: value})
    assert issue.path == f"tags.{key}" if "#" not in key else issue.path == f'tags["{key}"]'
    assert "characters AWS refuses" in issue.message


def test_aws_tag_text_of_any_script_with_spaces_and_the_allowed_punctuation_is_accepted():
    accepted("aws", tags={"Équipe": "données 1", "path/to:key": "a=b+c-d_e.f@g", "名前": "値"})


def test_aws_more_than_50_tags_counting_vmplanes_six_is_refused():
    """Old: 45 user tags validated; with vmplane's five tagPrefix keys and Name a resource gets 51."""
    limit = aws_spec.AWS_MAX_TAGS - len(cloudlimits.vmplane_tag_keys(_spec("aws")))
    accepted("aws", tags={f"t{i}": "v" for i in range(limit)})
    issue = refused("aws", tags={f"t{i}": "v" for i in range(limit + 1)})
    assert issue.path == "tags" and "51 tags per resource" in issue.message and "TagLimitExceeded" in issue.message
    # A user tag under one of vmplane's keys is overwritten, not added: it does not count twice.
    accepted("aws", tags={**{f"t{i}": "v" for i in range(limit - 1)}, "zop:env": "x", "Name": "y"})


def test_the_counted_keys_are_the_ones_the_tagger_adds():
    spec = _spec("aws")
    assert set(Tagger.for_spec(spec, "job-1").tags("vm", "n")) == cloudlimits.vmplane_tag_keys(spec)


@pytest.mark.parametrize("name", ["internal", "internal-api", "internal--x"])
def test_aws_an_env_whose_load_balancer_name_starts_internal_is_refused(name):
    """Old: validated; AWS refuses a load balancer name that begins with `internal-`."""
    lb = {"domain": "app.example.test"}
    issue = _refused_name("aws", name, loadBalancer=lb)
    assert issue.path == "name" and "internal-" in issue.message
    unchecked = _spec("aws", loadBalancer=lb).model_copy(update={"name": name})  # the driver's name for it
    assert aws_naming.lb_base_name(unchecked).startswith("internal-")


@pytest.mark.parametrize("name", ["internals", "internalx-api", "my-internal-api"])
def test_aws_names_whose_derived_lb_name_is_fine_are_accepted(name):
    lb = {"domain": "app.example.test"}
    accepted("aws", name="internal-api")  # no load balancer: no ALB name to refuse
    accepted("aws", name=name, loadBalancer=lb)
    assert not aws_naming.lb_base_name(_spec("aws", name=name, loadBalancer=lb)).startswith("internal-")


def test_the_alb_head_matches_the_driver_on_the_longest_names():
    for name in (LONGEST, "internal-" + "x" * 23, "a" * 18 + "-b", "x"):
        spec = _spec("aws", name=name, org=LONGEST)
        assert aws_naming.lb_base_name(spec).startswith(aws_spec.alb_name_head(name))
        assert len(aws_naming.target_group_name(spec)) <= 32 and len(aws_naming.lb_base_name(spec)) <= 32


def test_aws_a_health_check_path_over_1024_characters_is_refused():
    """Old: any path starting `/` validated; ELB's HealthCheckPath is 1..1024 (botocore's model)."""
    lb = {"domain": "app.example.test", "healthCheck": {"path": "/" + "p" * 1024}}
    issue = refused("aws", loadBalancer=lb)
    assert issue.path == "loadBalancer.healthCheck.path" and "1025 characters" in issue.message
    accepted("aws", loadBalancer={**lb, "healthCheck": {"path": "/" + "p" * 1023}})
    model = botocore.session.get_session().get_service_model("elbv2").operation_model("CreateTargetGroup")
    assert model.input_shape.members["HealthCheckPath"].metadata["max"] == aws_spec.AWS_MAX_HEALTH_PATH


@pytest.mark.parametrize(
    "bucket, why",
    [
        ("my..state", "two adjacent periods"),
        ("192.168.10.20", "IP address"),
        ("xn--state-bucket", "'xn--'"),
        ("sthree-state", "'sthree-'"),
        ("amzn-s3-demo-state", "'amzn-s3-demo-'"),
        ("state-s3alias", "'-s3alias'"),
        ("state--ol-s3", "'--ol-s3'"),
        ("state.mrap", "'.mrap'"),
        ("state--x-s3", "'--x-s3'"),
    ],
)
def test_aws_state_bucket_names_s3_refuses(bucket, why):
    """Old: each matched the spec's bucket pattern and validated; S3 answers InvalidBucketName."""
    issue = refused("aws", state={"bucket": bucket})
    assert issue.path == "state.bucket" and why in issue.message and "InvalidBucketName" in issue.message


def test_gcp_state_bucket_names_cloud_storage_refuses():
    """Old: validated; Cloud Storage refuses names starting goog or containing google."""
    for bucket in ("goog-state", "my-google-state", "my-g00gle-state", "10.0.0.1"):
        assert refused("gcp", state={"bucket": bucket}).path == "state.bucket"
    accepted("gcp", state={"bucket": "xn--fine-on-gcs"})  # an S3 rule, not Google's
    accepted("aws", state={"bucket": "my-google-state"})  # a Google rule, not S3's


# -- GCP -----------------------------------------------------------------------------------------


def test_gcp_more_than_64_labels_counting_vmplanes_is_refused():
    """Old: validated; Compute Engine allows 64 labels and vmplane adds five (Name is not a label)."""
    limit = gcp_spec.GCP_MAX_LABELS - len(cloudlimits.VMPLANE_TAG_NAMES)
    accepted("gcp", tags={f"t{i}": "v" for i in range(limit)})
    issue = refused("gcp", tags={f"t{i}": "v" for i in range(limit + 1)})
    assert issue.path == "tags" and "65 labels" in issue.message


def test_gcp_label_keys_and_values_longer_than_63_once_folded_are_refused():
    """Old: validated, and gcp_labels cut them to 63 (two long keys could become one label)."""
    issue = refused("gcp", tags={"k" * 64: "v"})
    assert "Google allows 63" in issue.message and issue.path == "tags." + "k" * 64
    issue = refused("gcp", tags={"team": "v" * 64})
    assert "the value is 64 characters" in issue.message
    # camelCase folds to snake case (aB -> a_b): a 54-character key is an 81-character label.
    assert "is 81 characters" in refused("gcp", tags={"aB" * 27: "v"}).message
    accepted("gcp", tags={"k" * 63: "v" * 63})


def test_gcp_two_tags_that_fold_to_one_label_are_refused():
    """Old: validated; gcp_labels kept one of `Team` and `team` and dropped the other silently."""
    issue = refused("gcp", tags={"Team": "a", "team": "b"})
    assert "both the label 'team'" in issue.message


def test_gcp_names_from_the_longest_spec_fit_googles_lengths():
    """Nothing to refuse: every derived name is hashed to 63 and a MIG's base to 58 (naming.py)."""
    spec = _spec("gcp", name=LONGEST, org=LONGEST, pools={LONGEST: {"mode": "asg", "min": 0, "max": 1, "desired": 0}})
    for name in (
        gcp_naming.mig(spec, LONGEST),
        gcp_naming.rotated(spec, LONGEST, 99, 999),
        gcp_naming.instance_group(spec, "us-central1-a"),
    ):
        assert gcp_naming.valid(name) and len(name) <= 63
    base = gcp_naming.mig_base_instance_name(spec, LONGEST)
    assert len(base) <= 58 and gcp_naming.valid(base)
    assert 6 <= len(gcp_naming.service_account_id(spec)) <= 30


# -- Proxmox -------------------------------------------------------------------------------------


@pytest.mark.parametrize("tags", [{"-x": "v"}, {".hidden": "v"}, {"::": ""}, {"+plus": "1"}])
def test_proxmox_tags_that_fold_to_a_token_pve_refuses_are_refused(tags):
    """Old: validated; proxmox_tags made `-x-v`, `.hidden-v`, `` or `+plus-1`, which PVE's pve-tag refuses."""
    issue = refused("proxmox", tags=tags)
    assert issue.path.startswith("tags") and "PVE refuses" in issue.message


def test_proxmox_a_tag_prefix_that_folds_to_a_bad_token_is_refused():
    issue = refused("proxmox", tagPrefix=".")
    assert issue.path == "tagPrefix" and "PVE refuses" in issue.message


def test_proxmox_ordinary_tags_are_accepted_and_fold_as_checked():
    accepted("proxmox", tags={"Team": "Platform", "cost_center": "cc-1234", "v1.2": "x+y"})
    assert all(pve_spec.tag_token_ok(t) for t in proxmox_tags({"Team": "Platform", "v1.2": "x+y"}))


# -- what still validates ------------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.jsonc")), ids=lambda p: p.name)
def test_every_shipped_example_still_validates(path):
    load_spec(path)


@pytest.mark.parametrize("cloud", [Cloud.aws, Cloud.gcp, Cloud.proxmox])
def test_every_starter_still_validates(cloud):
    parse_spec_text(render_starter(LONGEST, LONGEST, cloud=cloud), "starter.jsonc")
    parse_spec_text(render_starter("internal", "acme", cloud=cloud), "starter.jsonc")  # no load balancer


# -- helpers -------------------------------------------------------------------------------------


def _spec(cloud: str, **fields: object):
    return parse_spec_text(spec_text(cloud, **fields), "env.jsonc")


def _refused_name(cloud: str, name: str, **fields: object) -> SpecIssue:
    with pytest.raises(SpecError) as exc:
        parse_spec_text(spec_text(cloud, name=name, **fields), "env.jsonc")
    (issue,) = exc.value.issues
    assert issue.line == 2  # "name" is the first member
    return issue


def test_every_rule_names_who_answers_and_a_source_on_the_providers_own_site():
    # Each cloud's rules live in its spec module (clouds/<cloud>/spec.py RULES).
    rules = [r for m in (aws_spec, gcp_spec, pve_spec) for r in m.RULES]
    assert all(isinstance(r, cloudlimits.Rule) for r in rules)
    assert len(rules) == 9  # AWS: tag characters, tag count, aws: prefix, ALB name, health path, S3; GCS; labels; PVE
    hosts = ("https://docs.aws.amazon.com/", "https://cloud.google.com/", "https://git.proxmox.com/")
    assert all(r.who and r.answer and r.source.startswith(hosts) for r in rules)
