"""HTTP for `vmplane deps download`: the stdlib's urllib with timeouts, retries on transient failures,
a User-Agent and verified TLS (the default context). No credentials are ever sent or logged; the
registry's anonymous bearer token is passed in by the caller and never appears in an error."""

from __future__ import annotations

import hashlib
import http.client
import os
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.message import Message
from pathlib import Path
from typing import TypeVar

from vmplane.errors import UsageError

TIMEOUT = 30.0  # seconds without a byte before a request is abandoned
BACKOFF = 1.0  # seconds, times the attempt number
TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
CHUNK = 1 << 20
T = TypeVar("T")


class FetchError(UsageError):
    """A source that could not be read or whose bytes are not what its index says; names the URL."""


@dataclass(frozen=True)
class Response:
    url: str
    status: int
    headers: Message
    body: bytes


def user_agent() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"vmplane/{version('vmplane')} (deps download)"
    except PackageNotFoundError:  # pragma: no cover - running from a source tree without metadata
        return "vmplane (deps download)"


def get(url: str, headers: Mapping[str, str] | None = None, *, ok: frozenset[int] = frozenset()) -> Response:
    """GET `url` whole. A 2xx answer, or a status listed in `ok` (e.g. 401 for a token challenge),
    is returned; anything else raises FetchError after the retries a transient failure deserves."""

    def once() -> Response:
        try:
            with urllib.request.urlopen(_request(url, headers), timeout=TIMEOUT) as resp:
                return Response(url, resp.status, resp.headers, resp.read())
        except urllib.error.HTTPError as err:
            if err.code in ok:
                return Response(url, err.code, err.headers, err.read())
            raise

    return _retrying(url, once)


def download(
    url: str, dest: Path, expected_sha256: str, progress: Callable[[int, int | None], None] | None = None
) -> None:
    """Stream `url` into `dest` (via a temporary file beside it), computing its sha256 on the way;
    raises FetchError, keeping nothing, when the sum is not `expected_sha256`."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.part")
    try:
        digest = _retrying(url, lambda: _stream(url, tmp, progress))
        if digest != expected_sha256:
            raise FetchError(f"{url}: sha256 {digest} is not the index's {expected_sha256}: refused")
        tmp.replace(dest)
    finally:
        tmp.unlink(missing_ok=True)


def attempts() -> int:
    """Tries per request: VMPLANE_DEPS_ATTEMPTS, read per call (not at import: the tests' fork server
    imports vmplane once for many commands, each with its own environment)."""
    return int(os.environ.get("VMPLANE_DEPS_ATTEMPTS", "3"))


def _retrying(url: str, once: Callable[[], T]) -> T:
    """`once()`, again after a pause when it fails transiently (a 5xx/429, a reset, a timeout)."""
    tries = attempts()
    for attempt in range(1, tries + 1):
        try:
            return once()
        except urllib.error.HTTPError as err:
            why, transient = f"HTTP {err.code} {err.reason}", err.code in TRANSIENT_STATUS
        except http.client.HTTPException as err:  # e.g. IncompleteRead: the connection dropped mid-body
            why, transient = f"interrupted ({type(err).__name__})", True
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", None) or err
            # A name that does not exist stays so, and a port nobody listens on answers at once: retrying
            # either only delays the refusal. A timeout, a reset or EAI_AGAIN may pass.
            permanent = isinstance(reason, ConnectionRefusedError) or (
                isinstance(reason, socket.gaierror) and reason.errno == socket.EAI_NONAME
            )
            transient = not permanent
            why = f"unreachable ({reason})"
        if not transient or attempt == tries:
            raise FetchError(f"{url}: {why}")
        time.sleep(BACKOFF * attempt)
    raise AssertionError("unreachable")  # pragma: no cover


def get_verified(url: str, expected_sha256: str, cache: Path | None) -> bytes:
    """The bytes of a repository index whose sum another index gives (Packages.xz from Release,
    primary from repomd.xml), from `cache/<sha256>` when a run already fetched it."""
    kept = cache / expected_sha256 if cache is not None else None
    if kept is not None and kept.is_file() and sha256_of(kept) == expected_sha256:
        return kept.read_bytes()
    body = get(url).body
    digest = hashlib.sha256(body).hexdigest()
    if digest != expected_sha256:
        raise FetchError(f"{url}: sha256 {digest} is not the index's {expected_sha256}: refused")
    if kept is not None:
        kept.parent.mkdir(parents=True, exist_ok=True)
        tmp = kept.with_name(f".{kept.name}.part")
        tmp.write_bytes(body)
        tmp.replace(kept)
    return body


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _stream(url: str, tmp: Path, progress: Callable[[int, int | None], None] | None) -> str:
    h = hashlib.sha256()
    with urllib.request.urlopen(_request(url, None), timeout=TIMEOUT) as resp, tmp.open("wb") as out:
        length = resp.headers.get("Content-Length")
        total = int(length) if length and length.isdigit() else None
        done = 0
        while chunk := resp.read(CHUNK):
            h.update(chunk)
            out.write(chunk)
            done += len(chunk)
            if progress is not None:
                progress(done, total)
    return h.hexdigest()


def _request(url: str, headers: Mapping[str, str] | None) -> urllib.request.Request:
    return urllib.request.Request(url, headers={"User-Agent": user_agent(), **(headers or {})})
