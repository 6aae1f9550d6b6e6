"""The generated stack's manifest copy with the real `terraform` on the AWS sandbox, on the SHIPPED manifests
(which leave al2023 and the NGINX image unpinned): the `--sandbox` stack applies (nothing boots there; its
override says what a real VM would fail closed on), the real stack's precondition refuses the same copy,
and an edited copy then plans as an in-place launch template (user-data) change."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from tests.helpers import Cli, Sandbox, terraform_env, write_env

from vmplane.deps import cache
from vmplane.deps.manifest import Family, Image, Manifest, Package, PackageSource
from vmplane.envspec.models import Arch, BootstrapMode

COPY = "vmplane.env.vmconfig.nginx.amd64.json"


def pinned_manifest(note: str = "") -> Manifest:
    """A manifest pinning every family and the NGINX image (made-up checksums: nothing boots on the
    sandbox): a user's edit of a stack's copy."""
    pkg = Package(name="docker", version="1", url="https://example.invalid/docker.pkg", sha256="e" * 64)
    source = PackageSource(repository="https://example.invalid/")
    families = {
        f: Family(packageManager="apt" if f != "al2023" else "dnf", source=source, packages=[pkg])
        for f in ("al2023", "debian-12", "ubuntu-24.04")
    }
    image = Image(repository="docker.io/library/nginx", tag="1.27.3-alpine", digest="sha256:" + "f" * 64)
    return Manifest(
        kind=BootstrapMode.nginx,
        arch=Arch.amd64,
        generatedAt=datetime(2026, 12, 1, tzinfo=UTC),
        families=families,
        images={"nginx": image},
        unavailable={"note": note} if note else {},
    )


def tf(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["terraform", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.sandbox
@pytest.mark.slow(first=True)  # terraform plans and applies on the sandbox (~85 s): started first
def test_the_sandbox_stack_applies_the_real_one_refuses_and_an_edited_copy_plans_as_a_template_change(
    cli: Cli, sandbox: Sandbox, tmp_path: Path
) -> None:
    env, why = terraform_env(tmp_path)
    if env is None:
        pytest.skip(why)
    env_file = write_env(tmp_path, "itest-tf-vmconfig")  # fixed.jsonc: al2023, nginx; the home: fresh
    stack = tmp_path / "stack"
    proc = cli.run("tf", "generate", "-f", str(env_file), "-d", str(stack), "--sandbox")
    assert proc.returncode == 0, proc.stderr
    assert "note: sandbox: a real VM would fail closed here: pools.web.image:" in proc.stderr
    assert (stack / COPY).read_text() == cache.builtin(BootstrapMode.nginx, Arch.amd64).dumps()  # type: ignore[union-attr]
    override = (stack / "vmplane.env.sandbox_override.tf").read_text()
    assert "# The sandbox boots nothing" in override and "A real VM would fail closed on:" in override
    assert f"pools.web.image: {COPY} does not pin what the VMs need (al2023: " in override
    assert "vmconfig_fail_closed = false" in override
    assert tf(env, stack, "init", "-input=false").returncode == 0
    applied = tf(env, stack, "apply", "-auto-approve", "-input=false", "-no-color")
    try:
        assert applied.returncode == 0, applied.stdout[-3000:] + applied.stderr[-3000:]

        # The real stack keeps the precondition: without the sandbox's locals, the same copy is refused.
        (stack / "vmplane.env.sandbox_override.tf").write_text(override[: override.index("locals {")])
        refused = tf(env, stack, "plan", "-input=false", "-no-color")
        assert refused.returncode != 0
        message = " ".join(refused.stderr.split())
        assert f"pools.web.image: {COPY} does not pin family al2023 or the nginx image" in message, refused.stderr
        assert "vmplane deps download --arch amd64" in message
        (stack / "vmplane.env.sandbox_override.tf").write_text(override)

        (stack / COPY).write_text(pinned_manifest("edited").dumps())  # the user edits the copy
        plan = tf(env, stack, "plan", "-input=false", "-no-color", "-detailed-exitcode")
        assert plan.returncode == 2, plan.stderr  # 2: changes present
        text = plan.stdout
        section = text[text.index('# aws_launch_template.pool["web"] will be updated in-place') :]
        assert section.split("\n\n  #", 1)[0].count("~ user_data") == 1
        # (The sandbox's instances also plan a replacement, forced by `associate_public_ip_address`
        # drifting in moto: not user-data, which their lifecycle ignores.)
    finally:
        assert tf(env, stack, "destroy", "-auto-approve", "-input=false", "-no-color").returncode == 0
