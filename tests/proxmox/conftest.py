"""Fixtures for the Proxmox tests: a fakepve cluster per test with the API token in the environment,
the guest player on it, a Proxmox spec and a Context the way the pipeline hands one to the driver, with
the network-side ids other steps record (the bridge, the env's pool, the security group) set up here; and
for the init-node tests, a local HTTPS server with published sums and `vmplane` run in-process."""

from __future__ import annotations

import http.server
import ssl
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fakepve.certs import make_cert
from tests.proxmox.fakecluster import Serving, serve, token_env
from tests.proxmox.guest import GuestPlayer
from tests.proxmox.init_node_kit import IMAGE, OTHER, SHA, Ran

from vmplane.cli import main as cli_main
from vmplane.clouds.base import Context, Tagger
from vmplane.clouds.proxmox import naming
from vmplane.clouds.proxmox.ids import pve_ids
from vmplane.clouds.proxmox.session import Pve, PveTarget
from vmplane.envspec.models import EnvSpec
from vmplane.state import InfraConfig

JOB_ID = "job-pve-0001"
BRIDGE = "vmbr0"


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Serving]:
    for key, value in token_env().items():
        monkeypatch.setenv(key, value)
    with serve(tmp_path) as serving:
        yield serving


@pytest.fixture
def guest(cluster: Serving) -> Iterator[GuestPlayer]:
    player = GuestPlayer(cluster).start()
    yield player
    player.stop()


def pve_for(serving: Serving) -> Pve:
    nodes = tuple(sorted(serving.pve.nodes))
    return Pve(PveTarget(endpoint=serving.pve.url, nodes=nodes, ca_file=serving.cafile))  # type: ignore[attr-defined]


@pytest.fixture
def pve(cluster: Serving) -> Pve:
    return pve_for(cluster)


def make_spec(size: int = 2, **pool: Any) -> EnvSpec:
    return EnvSpec.model_validate(
        {
            "name": "demo",
            "org": "acme",
            "provider": {"cloud": "proxmox", "endpoint": "https://127.0.0.1:8006", "node": "pve1"},
            "bootstrap": {"timeoutSeconds": 60},
            "pools": {"web": {"mode": "fixed", "size": size, "template": 9000, "diskGb": 10, **pool}},
        }
    )


def make_ctx(spec: EnvSpec, infra: InfraConfig | None = None) -> Context:
    ctx = Context(job_id=JOB_ID, spec=spec, infra=infra or InfraConfig(), tagger=Tagger.for_spec(spec, JOB_ID))
    ctx.log = lambda msg: ctx.notes.append(f"log: {msg}")
    return ctx


def network_ready(pve: Pve, ctx: Context) -> None:
    """What stepCreateNetwork leaves (the pve-net helper's part): the env's PVE pool, the bridge and the
    cluster security group, created here through the API."""
    ids = pve_ids(ctx.infra)
    ids.Pool = naming.pool_id(ctx.spec, ctx.job_id)
    ids.IsoStorage = "local"
    group = naming.security_group(ctx.job_id)
    pve.post("pools", poolid=ids.Pool)
    pve.post("cluster/firewall/groups", group=group)
    ctx.infra.NetworkID = BRIDGE
    ctx.infra.VMSecurityGroupID = group
    ids.SecurityGroup = group


@pytest.fixture
def ctx(pve: Pve) -> Context:
    context = make_ctx(make_spec())
    network_ready(pve, context)
    return context


def form(body: bytes | str | dict[str, Any] | None) -> dict[str, str]:
    """A recorded request body (`Serving.pve.requests`) as fields: the fake keeps the raw form."""
    from urllib.parse import parse_qsl

    if isinstance(body, dict):
        return {k: str(v) for k, v in body.items()}
    text = body.decode(errors="replace") if isinstance(body, bytes) else (body or "")
    return dict(parse_qsl(text))


def writes(serving: Serving, since: int = 0) -> list[tuple[str, str, dict[str, str]]]:
    """The non-GET requests the fake saw from `since` on, bodies parsed."""
    return [(m, p, form(b)) for m, p, b in serving.pve.requests[since:] if m != "GET"]


# ---- vmplane proxmox init-node ----


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
def vmplane_main(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Callable[..., Ran]:
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
