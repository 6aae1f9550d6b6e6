"""The provider cache without a real terraform: what is mirrored comes from the stacks' own `terraform`
block, how a stack is pointed at the cache (lock copied, implied mirror linked, user files left alone), and
how `deps tf` reports bad arguments and a failing terraform."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from tests.deps_servers import closed_mirrors
from tests.helpers import Cli, free_port

from vmplane.deps import tf_cache
from vmplane.envspec.load import load_spec
from vmplane.envspec.models import Cloud
from vmplane.tf import provider_cache
from vmplane.tf.aws.common import PROVIDER_VERSION as AWS_VERSION
from vmplane.tf.gcp.common import PROVIDER_VERSION as GCP_VERSION
from vmplane.tf.generate import generate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LOCK = 'provider "registry.terraform.io/hashicorp/aws" {\n  version = "5.100.0"\n  hashes = ["h1:x="]\n}\n'


def test_required_providers_are_the_stacks_own() -> None:
    assert provider_cache.required(Cloud.aws) == {"hashicorp/aws": AWS_VERSION}
    assert provider_cache.required(Cloud.gcp) == {"hashicorp/google": GCP_VERSION}
    # The mirrored block is the one the stack renders, not a copy of its versions.
    main = generate(load_spec(EXAMPLES / "web.jsonc"))["vmplane.env.main.tf"]
    assert provider_cache.versions_tf(Cloud.aws).strip() in main


def test_attach_without_a_cache_changes_nothing_and_says_how_to_make_one(tmp_path: Path) -> None:
    stack = tmp_path / "stack"
    stack.mkdir()
    got = provider_cache.attach(tmp_path / "home", Cloud.aws, stack)
    assert (got.lock, got.plugins) == (None, None)
    assert "vmplane deps tf --cloud aws --platform" in got.note
    assert list(stack.iterdir()) == []


def _cache(home: Path) -> Path:
    lock = tf_cache.lock_path(home, "aws")
    lock.parent.mkdir(parents=True)
    lock.write_text(LOCK)
    tf_cache.providers_dir(home).mkdir(parents=True)
    return lock


def test_attach_copies_the_lock_and_links_the_implied_mirror(tmp_path: Path) -> None:
    home, stack = tmp_path / "home", tmp_path / "stack"
    _cache(home)
    stack.mkdir()
    (stack / ".terraform.lock.hcl").write_text("stale\n")
    got = provider_cache.attach(home, Cloud.aws, stack)
    assert (stack / ".terraform.lock.hcl").read_text() == LOCK
    link = stack / "terraform.d" / "plugins"
    assert link.is_symlink() and link.resolve() == tf_cache.providers_dir(home).resolve()
    assert (got.lock, got.plugins) == (".terraform.lock.hcl", "terraform.d/plugins")
    # Idempotent: a second attach leaves the same link.
    provider_cache.attach(home, Cloud.aws, stack)
    assert link.readlink() == tf_cache.providers_dir(home).resolve()
    # No cache for GCP: a GCP stack gets nothing.
    assert provider_cache.attach(home, Cloud.gcp, tmp_path).lock is None


def test_attach_leaves_a_users_own_plugins_directory_alone(tmp_path: Path) -> None:
    home, stack = tmp_path / "home", tmp_path / "stack"
    _cache(home)
    own = stack / "terraform.d" / "plugins"
    own.mkdir(parents=True)
    (own / "mine").write_text("x")
    got = provider_cache.attach(home, Cloud.aws, stack)
    assert got.plugins is None and "your own directory" in got.note
    assert not own.is_symlink() and (own / "mine").read_text() == "x"


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(home=tmp_path / "home", sandbox_port=free_port())


def test_deps_tf_refuses_bad_arguments(cli: Cli) -> None:
    assert cli.run("deps", "tf").returncode == 2
    proc = cli.run("deps", "tf", "--platform", "linux-amd64")
    assert proc.returncode == 2 and "OS_ARCH" in proc.stderr
    proc = cli.run("deps", "tf", "--platform", "linux_amd64", "--cloud", "azure")
    assert proc.returncode == 2 and "azure" in proc.stderr


def test_a_failing_terraform_is_named_with_its_command_line_and_stderr(cli: Cli, tmp_path: Path) -> None:
    fake = tmp_path / "fake-terraform"
    fake.write_text(
        f"#!{sys.executable}\nimport sys, json\n"
        "if sys.argv[1:2] == ['version']:\n    print(json.dumps({'platform': 'linux_amd64'})); sys.exit(0)\n"
        "sys.stderr.write('Error: no route to the providers\\n'); sys.exit(1)\n"
    )
    fake.chmod(0o755)
    proc = cli.run(
        "deps", "tf", "--platform", "linux_amd64", "--cloud", "aws", extra_env={"VMPLANE_TERRAFORM": str(fake)}
    )
    assert proc.returncode == 3, proc.stderr
    assert f"{fake} providers mirror -no-color -platform=linux_amd64" in proc.stderr
    assert f"{fake} init -backend=false" in proc.stderr
    assert "no route to the providers" in proc.stderr
    assert not tf_cache.lock_path(cli.home, "aws").exists()
    proc = cli.run(
        "deps",
        "tf",
        "--platform",
        "linux_amd64",
        "--cloud",
        "aws",
        "-o",
        "json",
        extra_env={"VMPLANE_TERRAFORM": str(fake)},
    )
    out = json.loads(proc.stdout)
    assert out["complete"] is False and out["clouds"][0]["lock"] is None


def test_a_missing_terraform_is_a_clear_error(cli: Cli, tmp_path: Path) -> None:
    env = {"VMPLANE_TERRAFORM": str(tmp_path / "nope")}
    proc = cli.run("deps", "tf", "--platform", "linux_amd64", extra_env=env)
    assert proc.returncode == 1 and "VMPLANE_TERRAFORM" in proc.stderr and "Traceback" not in proc.stderr


FAKE_OFFLINE_TF = """
import json, pathlib, sys
args = sys.argv[1:]
if args[:1] == ["version"]:
    print(json.dumps({"platform": "linux_amd64"}))
elif args[:2] == ["providers", "mirror"]:
    sys.exit("Error: could not connect to registry.terraform.io")
elif args[:1] == ["init"]:
    pass  # as if installed through the CLI config's mirror, for the host only
elif args[:2] == ["providers", "lock"]:
    platforms = [a.split("=", 1)[1] for a in args if a.startswith("-platform=")]
    missing = [p for p in platforms if p != "linux_amd64"]
    if missing:
        sys.exit(f"Error: no package for {missing[0]} in the mirror")
    pathlib.Path(".terraform.lock.hcl").write_text(f"# locked {platforms}\\n")
"""


def test_a_partial_refresh_locks_what_it_has_but_never_narrows_a_fuller_lock(cli: Cli, tmp_path: Path) -> None:
    fake = tmp_path / "fake-terraform"
    fake.write_text(f"#!{sys.executable}\n{FAKE_OFFLINE_TF}")
    fake.chmod(0o755)
    env = {"VMPLANE_TERRAFORM": str(fake)}
    # Only another platform than this host's: nothing to install through the CLI config, nothing locked.
    proc = cli.run("deps", "tf", "--platform", "darwin_arm64", "--cloud", "aws", "-o", "json", extra_env=env)
    aws = json.loads(proc.stdout)["clouds"][0]
    assert proc.returncode == 3 and aws["lock"] is None
    assert any("darwin_arm64" in why and "serves only linux_amd64" in why for why in aws["unavailable"])
    both = ["--platform", "linux_amd64", "--platform", "darwin_arm64", "--cloud", "aws", "-o", "json"]
    # No lock yet: the platform it could get is locked, the other named.
    proc = cli.run("deps", "tf", *both, extra_env=env)
    aws = json.loads(proc.stdout)["clouds"][0]
    assert proc.returncode == 3 and aws["platforms"] == ["linux_amd64"], proc.stderr
    assert any(why.startswith("darwin_arm64:") for why in aws["unavailable"])
    lock = tf_cache.lock_path(cli.home, "aws")
    assert lock.read_text() == "# locked ['linux_amd64']\n"
    # A fuller lock made elsewhere stays when this machine can refresh only part of it.
    lock.write_text("# the fuller lock\n")
    lock.with_name("aws.json").write_text(json.dumps({"platforms": ["linux_amd64", "darwin_arm64"]}))
    proc = cli.run("deps", "tf", *both, extra_env=env)
    aws = json.loads(proc.stdout)["clouds"][0]
    assert proc.returncode == 3 and aws["platforms"] == ["linux_amd64", "darwin_arm64"]
    assert any("rather than narrow it" in why for why in aws["unavailable"])
    assert lock.read_text() == "# the fuller lock\n"


def test_tf_generate_without_a_cache_writes_the_stack_as_before_and_says_how_to_make_one(
    cli: Cli, tmp_path: Path
) -> None:
    stack = tmp_path / "stack"
    proc = cli.run(
        "tf", "generate", "-f", str(EXAMPLES / "web.jsonc"), "-d", str(stack), "-o", "json", extra_env=closed_mirrors()
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["providerCache"]["lock"] is None
    assert "vmplane deps tf --cloud aws --platform linux_amd64` makes one" in proc.stderr
    assert not (stack / ".terraform.lock.hcl").exists() and not (stack / "terraform.d").exists()
