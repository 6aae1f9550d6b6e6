"""The vmconfig manifests in a generated stack: copied beside the .tf files (replaced on a new generate),
read by the user-data through Terraform (`base64gzip(file(copy))`), and a precondition on what they leave
unpinned. With the real `terraform` (offline, through the provider mirror): validate, and `console` shows
an edited copy changing the rendered user-data and the unpinned list."""

from __future__ import annotations

import base64
import gzip
import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tests import deps_servers
from tests.helpers import Cli, terraform_env, write_env

from vmplane.deps import cache
from vmplane.deps.manifest import Family, Image, Manifest, Package, PackageSource
from vmplane.envspec.load import load_spec
from vmplane.envspec.models import Arch, BootstrapMode
from vmplane.tf import vmconfig_files
from vmplane.tf.generate import generate, write

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
COPY = "vmplane.env.vmconfig.nginx.amd64.json"
PKG = Package(name="docker", version="25.0.6-1.amzn2023.0.2", url="https://cdn.amazonlinux.com/d.rpm", sha256="c" * 64)
AL2023 = Family(packageManager="dnf", source=PackageSource(repository="https://cdn.amazonlinux.com/"), packages=[PKG])
NGINX = Image(repository="docker.io/library/nginx", tag="1.27.3-alpine", digest="sha256:" + "d" * 64)


def pinned() -> Manifest:
    return Manifest(
        kind=BootstrapMode.nginx,
        arch=Arch.amd64,
        generatedAt=datetime(2026, 12, 1, tzinfo=UTC),
        families={"al2023": AL2023},
        images={"nginx": NGINX},
    )


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VMPLANE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_generate_copies_the_current_manifest_and_the_user_data_reads_it(home: Path, tmp_path: Path) -> None:
    cache.save(home, pinned())
    files = generate(load_spec(EXAMPLES / "web.jsonc"))
    assert files[COPY] == pinned().dumps()
    vm = files["vmplane.env.inputs.vm.tf"]
    assert f"content: {vmconfig_files.PLACEHOLDER}\n" in vm  # the manifest is not inlined ...
    assert f'file   = "{COPY}"' in vm
    main = files["vmplane.env.main.tf"]
    assert 'base64gzip(file("${path.module}/${local.vm.vmconfig[pool].file}"))' in main  # ... but read
    assert "base64encode(local.user_data[each.key])" in main
    assert "length(local.vmconfig_missing[each.key]) == 0" in main

    stack = tmp_path / "stack"
    write(files, stack)
    (stack / COPY).write_text("{}\n")  # an edited copy
    result = write(generate(load_spec(EXAMPLES / "web.jsonc")), stack)
    assert COPY in result.written and (stack / COPY).read_text() == pinned().dumps()  # generate replaces it


@pytest.mark.parametrize("example", ["gcp-fixed.jsonc", "gcp-web.jsonc"])
def test_gcp_stack_reads_the_copy_too(home: Path, example: str) -> None:
    spec = load_spec(EXAMPLES / example)
    files = generate(spec)
    main = files["vmplane.env.main.tf"]
    assert "local.user_data[each.key]" in main
    assert main.count("length(local.vmconfig_missing[each.key]) == 0") == 1  # on the instance template
    kinds = {(spec.bootstrap.mode.value, p.arch.value) for p in spec.pools.values()}
    assert {n for n in files if vmconfig_files.is_copy(Path(n))} == {
        f"vmplane.env.vmconfig.{k}.{a}.json" for k, a in kinds
    }


def console(env: dict[str, str], stack: Path, *exprs: str) -> list[Any]:
    """The expressions' values from one `terraform console` run (each run costs seconds): one JSON list,
    which the console prints as a quoted string."""
    proc = subprocess.run(
        ["terraform", "console"],
        input=f"jsonencode([{', '.join(exprs)}])\n",
        cwd=stack,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    values: list[Any] = json.loads(json.loads(proc.stdout.strip()))
    return values


MISSING = 'local.vmconfig_missing["web"]'
USER_DATA_SHA = 'sha256(local.user_data["web"])'
# The cloud-config entry's content, as cloud-init's `gz+b64` reads it.
ENTRY = (
    'one([for f in yamldecode(local.user_data["web"]).write_files : f.content'
    ' if f.path == "/etc/vmplane/vmconfig.json"])'
)


@pytest.mark.slow
def test_terraform_validates_and_an_edited_copy_changes_the_user_data(home: Path, tmp_path: Path) -> None:
    env, why = terraform_env(tmp_path)
    if env is None:
        pytest.skip(why)
    stack = tmp_path / "stack"
    write(generate(load_spec(EXAMPLES / "web.jsonc")), stack)  # the shipped (or an empty) manifest
    for args in (["fmt", "-check"], ["init", "-input=false", "-backend=false"], ["validate", "-no-color"]):
        proc = subprocess.run(["terraform", *args], cwd=stack, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    shipped = cache.current(home, BootstrapMode.nginx, Arch.amd64)
    missing, before = console(env, stack, MISSING, USER_DATA_SHA)
    assert ("family al2023" in missing) == ("al2023" not in shipped.families)
    assert ("the nginx image" in missing) == ("nginx" not in shipped.images)

    (stack / COPY).write_text(pinned().dumps())  # the user edits the copy: nothing is regenerated
    missing, after, content = console(env, stack, MISSING, USER_DATA_SHA, ENTRY)
    assert missing == []
    assert after != before
    assert gzip.decompress(base64.b64decode(content)).decode() == pinned().dumps()


def test_tf_generate_writes_the_stack_and_warns_of_what_it_could_not_fetch(cli: Cli, tmp_path: Path) -> None:
    """A real stack's VMs boot: `tf generate` fetches as `apply` does; here every source refuses."""
    closed = "http://127.0.0.1:9"
    mirrors = json.dumps({"al2023": f"{closed}/al2023", "registry": closed})
    env_file = write_env(tmp_path, "tf-warn")  # fixed.jsonc: al2023, nginx; the shipped manifests
    proc = cli.run(
        "tf",
        "generate",
        "-f",
        str(env_file),
        "-d",
        str(tmp_path / "stack"),
        extra_env={"VMPLANE_DEPS_MIRRORS": mirrors},
    )
    assert proc.returncode == 0, proc.stderr
    assert f"warning: pools.web.image: {COPY} does not pin" in proc.stderr
    assert f"al2023: {closed}/al2023/latest/x86_64/mirror.list: unreachable" in proc.stderr
    assert "warning: ways out: point VMPLANE_DEPS_MIRRORS at a mirror" in proc.stderr
    assert (tmp_path / "stack" / COPY).is_file()
    assert not (tmp_path / "stack" / "vmplane.env.sandbox_override.tf").exists()


def test_tf_generate_of_a_real_stack_fetches_what_the_copy_lacks(cli: Cli, tmp_path: Path) -> None:
    with deps_servers.serve("amd64") as fake:
        env_file = write_env(tmp_path, "tf-fetch")
        stack = tmp_path / "stack"
        extra = {"VMPLANE_DEPS_MIRRORS": fake.mirrors()}
        proc = cli.run("tf", "generate", "-f", str(env_file), "-d", str(stack), extra_env=extra)
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr and "fetching the pinning metadata only" in proc.stderr
    copy = cache.parse((stack / COPY).read_text(), COPY)
    assert copy == cache.current(cli.home, BootstrapMode.nginx, Arch.amd64)
    assert (
        copy.missing("al2023") == []
        and copy.images["nginx"].digest == deps_servers.add_registry(deps_servers.Fake())["amd64"]
    )


# Every AWS example (`tf generate --sandbox` refuses GCP files: the sandbox stack emulates AWS only).
@pytest.mark.parametrize("example", ["web.jsonc", "fixed.jsonc", "dev-schedule.jsonc"])
def test_a_sandbox_stack_turns_the_precondition_off_and_says_why(home: Path, example: str) -> None:
    """The shipped manifests: a `--sandbox` stack's override sets `vmconfig_fail_closed = false` (nothing
    boots there) and names what a real VM would fail closed on; a real stack has no override, so its
    precondition holds (`vmconfig_fail_closed = true` in the locals)."""
    spec = load_spec(EXAMPLES / example)
    real, sandbox = generate(spec), generate(spec, "http://127.0.0.1:4566")
    condition = "!local.vmconfig_fail_closed || length(local.vmconfig_missing[each.key]) == 0"
    assert condition in real["vmplane.env.main.tf"] and condition in sandbox["vmplane.env.main.tf"]
    assert "vmconfig_fail_closed = true" in real["vmplane.env.main.tf"]
    assert "vmplane.env.sandbox_override.tf" not in real
    override = sandbox["vmplane.env.sandbox_override.tf"]
    assert "vmconfig_fail_closed = false" in override and "# The sandbox boots nothing" in override
    assert "# A real VM would fail closed on:" in override and "nginx image:" in override
