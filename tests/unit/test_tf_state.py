"""tf/state.py on moto: the state object is created with a conditional put and never overwritten."""

from __future__ import annotations

import json

import pytest

from vmplane.tf.generate import generate
from vmplane.tf.state import StateExistsError, init_state, location, state_exists

from .support import variant


@pytest.fixture
def with_state(spec):
    return variant(spec, state={"bucket": "acme-tfstate"})


def test_init_creates_a_private_versioned_bucket_and_an_empty_state(aws, with_state):
    assert not state_exists(aws, with_state)
    loc = init_state(aws, with_state)
    assert loc.key == "vmplane/acme/demo-fixed/terraform.tfstate"
    s3 = aws.client("s3")
    body = json.loads(s3.get_object(Bucket=loc.bucket, Key=loc.key)["Body"].read())
    assert (body["version"], body["serial"], body["resources"]) == (4, 0, [])
    assert s3.get_bucket_versioning(Bucket=loc.bucket)["Status"] == "Enabled"
    assert s3.get_public_access_block(Bucket=loc.bucket)["PublicAccessBlockConfiguration"]["BlockPublicPolicy"]
    assert state_exists(aws, with_state)


def test_a_second_init_refuses_and_overwrites_nothing(aws, with_state):
    loc = init_state(aws, with_state)
    s3 = aws.client("s3")
    s3.put_object(Bucket=loc.bucket, Key=loc.key, Body=b'{"version": 4, "serial": 7}')  # terraform wrote to it
    with pytest.raises(StateExistsError, match="already exists: the state of acme/demo-fixed"):
        init_state(aws, with_state)
    assert json.loads(s3.get_object(Bucket=loc.bucket, Key=loc.key)["Body"].read())["serial"] == 7
    # Another environment in the same bucket gets its own object.
    other = variant(with_state, name="demo-other")
    assert init_state(aws, other).key == "vmplane/acme/demo-other/terraform.tfstate"


def test_the_stack_gets_an_s3_backend_and_the_sandbox_override_replaces_it(with_state):
    files = generate(with_state, "http://127.0.0.1:4566")
    backend = files["vmplane.env.backend.tf"]
    loc = location(with_state)
    assert f'bucket       = "{loc.bucket}"' in backend and f'key          = "{loc.key}"' in backend
    assert "use_lockfile = true" in backend
    override = files["vmplane.env.sandbox_override.tf"]
    assert 'backend "s3"' in override and "use_path_style" in override
    assert "vmplane.env.backend.tf" not in generate(with_state.model_copy(update={"state": None}))


def test_init_state_for_builds_the_clients_for_the_state_region_and_the_sandbox(monkeypatch, with_state):
    import vmplane.tf.state as tf_state

    seen = []
    monkeypatch.setattr(tf_state, "AwsClients", lambda target: seen.append(target) or "clients")
    monkeypatch.setattr(tf_state, "init_state", lambda aws, spec: (aws, spec.state.bucket))
    in_eu = variant(with_state, state={"bucket": "acme-tfstate", "region": "eu-west-1"})
    assert tf_state.init_state_for(in_eu, "http://127.0.0.1:1") == ("clients", "acme-tfstate")
    assert (seen[0].region, seen[0].endpoint_url, seen[0].profile) == ("eu-west-1", "http://127.0.0.1:1", None)
    tf_state.init_state_for(with_state, None)
    assert (seen[1].region, seen[1].endpoint_url) == (with_state.provider.region, None)
