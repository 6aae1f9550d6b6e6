"""`vmplane deps tf` and the generated stack with the real terraform: the cache is filled from the machine's
provider mirror (through a CLI config, as a user's would be), and the stack then initialises and validates
with an EMPTY CLI config (no mirror, no registry) from the cache alone, its lock unchanged. Skips with the
reason where terraform or the mirror is absent."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest
from tests.deps_servers import closed_mirrors
from tests.helpers import EXAMPLES, Cli, free_port, write_env

from vmplane.deps import tf_cache
from vmplane.tf.aws.common import PROVIDER_VERSION

pytestmark = pytest.mark.slow


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(home=tmp_path / "home", sandbox_port=free_port())


def dirhash_h1(package: Path) -> str:
    """Terraform's "h1:" package hash (Go's dirhash.Hash1), computed here independently of terraform."""
    lines = ""
    for f in sorted(p for p in package.rglob("*") if p.is_file()):
        digest = hashlib.sha256(f.read_bytes()).hexdigest()
        lines += f"{digest}  {f.relative_to(package).as_posix()}\n"
    return "h1:" + base64.b64encode(hashlib.sha256(lines.encode()).digest()).decode()


def lock_hashes(text: str) -> set[str]:
    return set(re.findall(r'"(h1:[^"]+|zh:[^"]+)"', text))


def mirror_package(env: dict[str, str]) -> Path:
    rc = Path(env["TF_CLI_CONFIG_FILE"]).read_text()
    found = re.search(r'path\s*=\s*"([^"]+)"', rc)
    assert found, rc
    return Path(found.group(1)) / f"registry.terraform.io/hashicorp/aws/{PROVIDER_VERSION}/linux_amd64"


def deps_tf(cli: Cli, env: dict[str, str], *args: str) -> dict:
    proc = cli.run("deps", "tf", "--platform", "linux_amd64", *args, "-o", "json", extra_env=env, timeout=600)
    out: dict = json.loads(proc.stdout)
    assert proc.returncode == (0 if out["complete"] else 3), proc.stderr
    return out


def terraform(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["terraform", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )


def test_deps_tf_caches_aws_and_a_stack_inits_offline_from_it(cli: Cli, tf_env, tmp_path: Path) -> None:
    out = deps_tf(cli, tf_env, "--cloud", "aws")
    assert out["complete"], out
    lock = tf_cache.lock_path(cli.home, "aws")
    text = lock.read_text()
    assert 'provider "registry.terraform.io/hashicorp/aws"' in text and f'version     = "{PROVIDER_VERSION}"' in text
    assert dirhash_h1(mirror_package(tf_env)) in lock_hashes(text)  # the package's real hash

    # The cache holds the package itself (it outlives the mirror it came from), never a link to it.
    cached = tf_cache.providers_dir(cli.home) / f"registry.terraform.io/hashicorp/aws/{PROVIDER_VERSION}/linux_amd64"
    assert cached.is_dir() and not cached.is_symlink()

    stack = tmp_path / "stack"
    env_file = write_env(tmp_path, "tf-offline", example="web.jsonc")
    proc = cli.run("tf", "generate", "-f", str(env_file), "-d", str(stack), "-o", "json", extra_env=closed_mirrors())
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["providerCache"]["lock"] == ".terraform.lock.hcl"
    assert (stack / ".terraform.lock.hcl").read_text() == text
    assert (stack / "terraform.d" / "plugins").is_symlink()  # a pointer: no package copied into the stack

    empty = tmp_path / "empty.tfrc"
    empty.write_text("")
    offline = {**tf_env, "TF_CLI_CONFIG_FILE": str(empty)}
    init = terraform(offline, stack, "init", "-input=false", "-backend=false", "-no-color")
    assert init.returncode == 0, init.stdout + init.stderr
    valid = terraform(offline, stack, "validate", "-no-color")
    assert valid.returncode == 0 and "The configuration is valid" in valid.stdout, valid.stderr
    assert (stack / ".terraform.lock.hcl").read_text() == text  # used unchanged

    # Additive: a version already cached stays when `deps tf` runs again, and so does the lock.
    other = tf_cache.providers_dir(cli.home) / "registry.terraform.io/hashicorp/aws/5.99.0/linux_amd64"
    other.mkdir(parents=True)
    (other / "terraform-provider-aws_v5.99.0_x5").write_text("an older version")
    assert deps_tf(cli, tf_env, "--cloud", "aws")["complete"]
    assert (other / "terraform-provider-aws_v5.99.0_x5").read_text() == "an older version"
    assert lock.read_text() == text and cached.is_dir()

    # The control: without the link to the cache the same init has nowhere to get the provider from.
    (stack / "terraform.d" / "plugins").unlink()
    assert terraform(offline, stack, "init", "-input=false", "-backend=false", "-no-color").returncode != 0


def test_tf_upgrade_replaces_the_lock_and_keeps_the_users_files(cli: Cli, tf_env, tmp_path: Path) -> None:
    assert deps_tf(cli, tf_env, "--cloud", "aws")["complete"]
    real = tf_cache.lock_path(cli.home, "aws").read_text()
    stack = tmp_path / "stack"
    env_file = write_env(tmp_path, "tf-upgrade", example="web.jsonc")
    assert cli.run("tf", "generate", "-f", str(env_file), "-d", str(stack), extra_env=closed_mirrors()).returncode == 0
    (stack / "custom.tf").write_text('output "mine" {\n  value = 1\n}\n')
    (stack / "terraform.tfvars").write_text('extra = "kept"\n')
    stale = 'provider "registry.terraform.io/hashicorp/aws" {\n  version = "5.0.0"\n}\n'
    tf_cache.lock_path(cli.home, "aws").write_text(stale)
    (stack / ".terraform.lock.hcl").write_text(stale)

    proc = cli.run("tf", "upgrade", "-f", str(env_file), "-d", str(stack), "-o", "json", extra_env=tf_env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["providerCache"]["refreshed"] == ["linux_amd64"]
    assert tf_cache.lock_path(cli.home, "aws").read_text() == real  # the cache's lock made anew
    assert (stack / ".terraform.lock.hcl").read_text() == real  # and copied into the stack
    assert (stack / "custom.tf").read_text() == 'output "mine" {\n  value = 1\n}\n'
    assert (stack / "terraform.tfvars").read_text() == 'extra = "kept"\n'


def test_deps_tf_for_gcp_names_what_it_cannot_get_or_the_stack_inits_offline(cli: Cli, tf_env, tmp_path: Path) -> None:
    gcp = deps_tf(cli, tf_env, "--cloud", "gcp")["clouds"][0]
    if gcp["lock"] is None:
        # This machine: hashicorp/google is neither in the mirror nor reachable in its registry.
        assert any("hashicorp/google" in why for why in gcp["unavailable"]), gcp
        assert not tf_cache.lock_path(cli.home, "gcp").exists()
        pytest.skip(
            "hashicorp/google is not in this machine's provider mirror: the GCP stack's offline init is not run"
        )
    stack = tmp_path / "stack"
    gcp = ("tf", "generate", "-f", str(EXAMPLES / "gcp-web.jsonc"), "-d", str(stack))
    assert cli.run(*gcp, extra_env=closed_mirrors()).returncode == 0
    empty = tmp_path / "empty.tfrc"
    empty.write_text("")
    offline = {**tf_env, "TF_CLI_CONFIG_FILE": str(empty)}
    init = terraform(offline, stack, "init", "-input=false", "-backend=false", "-no-color")
    assert init.returncode == 0, init.stdout + init.stderr
    assert terraform(offline, stack, "validate", "-no-color").returncode == 0
    assert (stack / ".terraform.lock.hcl").read_text() == tf_cache.lock_path(cli.home, "gcp").read_text()
