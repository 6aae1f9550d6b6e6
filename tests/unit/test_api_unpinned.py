"""The API's POST of a real (non-sandbox) environment whose manifests' sources cannot be reached: 422 naming
the pool, what is unpinned, the URL tried and the ways out, and no job recorded. With the sources
reachable (the fake upstreams, tests/deps_servers.py), the same POST pins them and records the job."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests import deps_servers

from vmplane.api.app import JOBS, create_app
from vmplane.deps import cache
from vmplane.envspec.load import load_spec
from vmplane.envspec.models import Arch, BootstrapMode
from vmplane.jobs import precheck, tokens
from vmplane.settings import Settings
from vmplane.store.db import transaction

WEB = Path(__file__).resolve().parents[2] / "examples" / "web.jsonc"


def client_for(home: Path) -> tuple[TestClient, dict[str, str]]:
    settings = Settings(home=home)
    app = create_app(settings, run_workflows=False)  # jobs are recorded, never run
    with transaction(settings.db_url) as s:
        token, _ = tokens.create_token(s, "acme", tokens.Role.admin)
    return TestClient(app), {"Authorization": f"Bearer {token}"}


def body() -> dict[str, object]:
    doc: dict[str, object] = json.loads(load_spec(WEB).model_dump_json(by_alias=True, exclude_none=True))
    return doc


def test_an_unreachable_source_is_a_422_and_nothing_is_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(*next(iter(deps_servers.closed_mirrors().items())))
    client, auth = client_for(tmp_path)

    r = client.post(JOBS, json=body(), headers=auth)

    assert r.status_code == 422, r.text
    message = r.json()["detail"]["message"]
    assert message.startswith("pools.web.image: vmplane.env.vmconfig.nginx.amd64.json does not pin")
    assert "al2023: http://127.0.0.1:9/al2023/latest/x86_64/mirror.list: unreachable" in message
    assert "Nothing was recorded" in message and "VMPLANE_DEPS_MIRRORS" in message
    assert "`vmplane deps download --arch amd64`" in message and "`bootstrap.mode: bare`" in message
    assert client.get(JOBS, headers=auth).json()["items"] == []


def test_reachable_sources_are_pinned_and_the_job_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No AWS account here: after the fetch, the cloud's answer to stepValidate's read-only checks
    # (jobs/precheck.py) is "no objection". Those checks are tested against the sandbox
    # (tests/integration/test_refused_before_job.py); this test is about the manifests.
    monkeypatch.setattr(precheck, "problems", lambda *_a: [])
    with deps_servers.serve("amd64") as upstream:
        monkeypatch.setenv("VMPLANE_DEPS_MIRRORS", upstream.mirrors())
        client, auth = client_for(tmp_path)
        r = client.post(JOBS, json=body(), headers=auth)
    assert r.status_code == 201, r.text
    pinned = cache.current(tmp_path, BootstrapMode.nginx, Arch.amd64)
    assert pinned.missing("al2023") == []
    assert "/al2023/latest/x86_64/mirror.list" in upstream.hits
    assert len(client.get(JOBS, headers=auth).json()["items"]) == 1
