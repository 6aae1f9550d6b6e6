"""The bootstrap tests' fake VM (`FakeHost`) and the local package archive it downloads from; what the
secret fetcher reads from (guest_secrets_fakes.py: moto, a fake IMDSv2, a fake GCP)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from tests.bootstrap import guest_secrets_fakes as fakes
from tests.bootstrap.fakehost import FakeHost, QuietHandler, Repo


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Repo]:
    root = tmp_path / "repo"
    root.mkdir()
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Repo(root, f"http://127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def host(tmp_path: Path, repo: Repo) -> FakeHost:
    return FakeHost(tmp_path / "vm", repo)


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    yield from fakes.serve_moto()


@pytest.fixture
def imds() -> Iterator[fakes.Served]:
    yield from fakes.serve_imds()


@pytest.fixture
def gcp() -> Iterator[fakes.Served]:
    yield from fakes.serve_gcp()
