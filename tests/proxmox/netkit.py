"""What the network/firewall/preflight/inventory tests share: a Proxmox spec, a Context, a Pve on the fake,
the form bodies of the requests the fake recorded (SDN is asserted from those: fakepve stores none), and a
`save` that kills the step at its n-th call (a crash right after recording intent)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
from tests.proxmox.fakecluster import Serving, serve, token_env

from vmplane.clouds.base import Context, Tagger
from vmplane.clouds.proxmox.session import Pve, PveTarget, token_from_env
from vmplane.envspec.models import EnvSpec
from vmplane.state import InfraConfig

NODES = ("pve1", "pve2")
_jobs = itertools.count(1)


class Killed(Exception):
    """The step was killed (raised from `save`, right after intent was recorded)."""


def spec(network: dict[str, Any] | None = None, **pools: Any) -> EnvSpec:
    return EnvSpec.model_validate(
        {
            "name": "demo-pve",
            "org": "acme",
            "provider": {"cloud": "proxmox", "endpoint": "https://127.0.0.1:8006", "nodes": list(NODES)},
            "network": network if network is not None else {"cidr": "10.40.0.0/16", "ingressPorts": [80, 443]},
            "pools": pools or {"web": {"mode": "fixed", "size": 2, "template": 9000}},
            "tags": {"team": "platform"},
        }
    )


def new_job() -> str:
    return f"job-pve-net-{next(_jobs)}"


def ctx(s: EnvSpec, job_id: str, infra: InfraConfig | None = None, kill_at: int | None = None) -> Context:
    """A Context whose `save` raises Killed at its `kill_at`-th call (1-based)."""
    calls = itertools.count(1)

    def save() -> None:
        if kill_at is not None and next(calls) == kill_at:
            raise Killed

    return Context(job_id=job_id, spec=s, infra=infra or InfraConfig(), tagger=Tagger.for_spec(s, job_id), save=save)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    with serve(Path(tmp_path_factory.mktemp("pki")), nodes=NODES) as serving:
        yield serving


@pytest.fixture
def pve(cluster: Serving) -> Pve:
    target = PveTarget(cluster.pve.url, NODES, ca_file=cluster.cafile)  # type: ignore[attr-defined]
    return Pve(target, token=token_from_env(token_env()))


def forms(cluster: Serving, since: int = 0, prefix: str = "") -> list[tuple[str, str, dict[str, list[str]]]]:
    """(method, path without /api2/json, form fields) of the requests since index `since`."""
    out = []
    for method, path, body in list(cluster.pve.requests)[since:]:
        short = path.removeprefix("/api2/json")
        if short.startswith(prefix):
            fields = parse_qs(body.decode() if isinstance(body, bytes) else str(body or ""), keep_blank_values=True)
            out.append((method, short, fields))
    return out


def mark(cluster: Serving) -> int:
    return len(cluster.pve.requests)
