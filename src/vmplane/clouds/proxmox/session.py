"""One Proxmox VE cluster's API for a driver: proxmoxer over HTTPS with an API token, every call through
the transport (clouds/transport.py: counts, retries on transient errors, metrics, the fault hook), and
task (UPID) polling.

Only the HTTPS API is used, never SSH to a node: what the API cannot do (upload a snippet) vmplane
does another way (a NoCloud ISO, `cloudinit_iso.py`). The token comes from the environment
(`PROXMOX_TOKEN_ID` = `user@realm!name`, `PROXMOX_TOKEN_SECRET`) and is never logged or put in an error.
"""

from __future__ import annotations

import ipaddress
import os
import re
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from vmplane.clouds.errors import AuthError, DeadlineExceededError
from vmplane.clouds.proxmox.api import Method, ProxmoxApi
from vmplane.clouds.proxmox.errors import translate
from vmplane.clouds.transport import Transport
from vmplane.clouds.waits import poll

TOKEN_ID_ENV = "PROXMOX_TOKEN_ID"
TOKEN_SECRET_ENV = "PROXMOX_TOKEN_SECRET"
CALL_TIMEOUT = 60.0  # seconds per HTTP request
# What fakepve answers as `repoid` on GET /version (a real PVE: its build's commit); see Pve.emulator.
EMULATOR_REPOID = "fakepve"
TASK_TIMEOUT = 600.0  # a clone of a large disk on slow storage takes minutes
_TOKEN_ID = re.compile(r"^[^\s!@]+@[^\s!@]+![A-Za-z][A-Za-z0-9._-]*$")
# `collection/<id>` pairs in a path: the id is replaced by its placeholder in a call's name.
_PLACEHOLDER = {
    "nodes": "{node}",
    "qemu": "{vmid}",
    "storage": "{storage}",
    "content": "{volume}",
    "tasks": "{upid}",
    "pools": "{pool}",
    "groups": "{group}",
    "zones": "{zone}",
    "vnets": "{vnet}",
    "subnets": "{subnet}",
    "rules": "{pos}",
    "roles": "{role}",
    "users": "{user}",
    "token": "{token}",
}


@dataclass(frozen=True)
class PveTarget:
    endpoint: str  # https://host:port
    nodes: tuple[str, ...]
    ca_file: str | None = None
    verify_tls: bool = True

    @property
    def loopback(self) -> bool:
        """An API on this machine. Not enough for the fault hook on its own (Pve.emulator says why)."""
        host = urlsplit(self.endpoint).hostname or ""
        try:
            return host == "localhost" or ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False

    def describe(self) -> str:
        return f"Proxmox VE {self.endpoint} (nodes {', '.join(self.nodes)})"


@dataclass(frozen=True)
class Token:
    user: str  # user@realm
    name: str
    secret: str

    def __repr__(self) -> str:  # never print the secret
        return f"Token({self.user}!{self.name})"

    @property
    def id(self) -> str:
        return f"{self.user}!{self.name}"


def token_from_env(env: dict[str, str] | None = None) -> Token:
    """The API token vmplane authenticates with; AuthError names the variables (never their values)."""
    source = os.environ if env is None else env
    token_id, secret = source.get(TOKEN_ID_ENV, ""), source.get(TOKEN_SECRET_ENV, "")
    if not token_id or not secret:
        raise AuthError(
            f"set {TOKEN_ID_ENV} (user@realm!tokenname) and {TOKEN_SECRET_ENV} to a Proxmox VE API token "
            "(`vmplane proxmox init-node` creates one with the privileges vmplane needs)",
            code="NoCredentials",
        )
    if not _TOKEN_ID.fullmatch(token_id):
        raise AuthError(f"{TOKEN_ID_ENV} must look like user@realm!tokenname", code="BadTokenId")
    user, _, name = token_id.partition("!")
    return Token(user=user, name=name, secret=secret)


def call_name(method: str, path: str) -> str:
    """`POST`, `nodes/pve1/qemu/101/clone` -> `POST /nodes/{node}/qemu/{vmid}/clone`: one name per API
    method, for the per-step tally, metrics and the fault hook."""
    parts = [p for p in path.strip("/").split("/") if p]
    out: list[str] = []
    for i, part in enumerate(parts):
        prev = parts[i - 1] if i else ""
        if i and prev in _PLACEHOLDER and out[-1] == prev:
            out.append(_PLACEHOLDER[prev])
            if prev == "content":  # a volume id (`local:iso/x.iso`) holds a slash: it is the rest of the path
                break
        elif part.isdigit():
            out.append("{n}")
        else:
            out.append(part)
    return f"{method.upper()} /{'/'.join(out)}"


class Pve:
    """The one way a Proxmox driver reaches the cluster: `get/post/put/delete(path, **params)`."""

    def __init__(self, target: PveTarget, token: Token | None = None) -> None:
        self.target = target
        self._token = token
        self._api: ProxmoxApi | None = None
        self._emulator: bool | None = None  # Pve.emulator, asked once
        self._lock = threading.Lock()
        self.transport = Transport(
            "proxmox",
            translate=lambda e, name: translate(e, name, endpoint=target.endpoint),
            endpoint=lambda _name: target.endpoint,
            is_sandbox=self.emulator,
            hooked=lambda name: not name.startswith("GET "),  # a read changes nothing worth crashing after
        )

    @property
    def nodes(self) -> tuple[str, ...]:
        return self.target.nodes

    def _client(self) -> ProxmoxApi:
        with self._lock:
            if self._api is None:
                from proxmoxer import ProxmoxAPI

                token = self._token or token_from_env()
                url = urlsplit(self.target.endpoint)
                verify: bool | str = (self.target.ca_file or True) if self.target.verify_tls else False
                self._api = ProxmoxAPI(
                    url.hostname,
                    port=url.port or 8006,
                    user=token.user,
                    token_name=token.name,
                    token_value=token.secret,
                    verify_ssl=verify,
                    timeout=CALL_TIMEOUT,
                    service="PVE",
                )
            return self._api

    def request(self, method: Method, path: str, /, **params: Any) -> Any:
        """One API call through the transport: counted, translated into vmplane's CloudError tree,
        transient failures retried with jittered backoff to a deadline. `path` is positional-only:
        `PUT access/acl` has a `path` parameter."""
        return self.transport.call(
            call_name(method, path), lambda: getattr(self._client()(path.strip("/")), method.lower())(**params)
        )

    def emulator(self) -> bool:
        """Whether this API is the emulator (fakepve) on this machine: the only Proxmox "sandbox", where the
        fault hook may act. An address alone proves nothing (a real cluster reached through an SSH tunnel
        is on 127.0.0.1 too), so the API is asked what it is: fakepve answers GET /version with its own
        name as `repoid`, a real PVE with the commit it was built from. Asked once, and only when the
        hook's variable is set (faults.sandbox_hook); not counted, as no step made it."""
        if self._emulator is None:
            self._emulator = self.target.loopback and self._says_emulator()
        return self._emulator

    def _says_emulator(self) -> bool:
        try:
            answer = self._client()("version").get()
        except Exception:  # whatever cannot say what it is, is not the emulator
            return False
        return isinstance(answer, dict) and answer.get("repoid") == EMULATOR_REPOID

    def get(self, path: str, /, **params: Any) -> Any:
        return self.request("GET", path, **params)

    def post(self, path: str, /, **params: Any) -> Any:
        return self.request("POST", path, **params)

    def put(self, path: str, /, **params: Any) -> Any:
        return self.request("PUT", path, **params)

    def delete(self, path: str, /, **params: Any) -> Any:
        return self.request("DELETE", path, **params)

    # ---- tasks ----
    def wait_task(self, node: str, upid: str, *, timeout: float = TASK_TIMEOUT, what: str = "task") -> None:
        """Wait for a task (a UPID a POST returned) to stop; a task that ended in error raises with its
        exit status and the last lines of its log."""
        from vmplane.clouds.proxmox.errors import task_failed

        def stopped() -> dict[str, Any] | None:
            status: dict[str, Any] = self.get(f"nodes/{node}/tasks/{upid}/status")
            return status if status.get("status") == "stopped" else None

        try:  # PVE has no long poll: a geometric backoff without the `late` bound, as before
            status = poll(stopped, what=what, timeout=timeout, first=0.1, factor=1.5, cap=3.0, late=None)
        except DeadlineExceededError as e:
            if e.__cause__ is not None:  # a status read that gave up on its own retries: its message says so
                raise
            raise DeadlineExceededError(f"{what} ({upid}) still running after {timeout:.0f}s on {node}") from e
        exit_status = str(status.get("exitstatus", ""))
        if exit_status == "OK" or exit_status.startswith("WARNINGS"):
            return
        log = self.get(f"nodes/{node}/tasks/{upid}/log", limit=50)
        lines = [str(e.get("t", "")) for e in log or [] if isinstance(e, dict)]
        raise task_failed(what, exit_status, lines[-5:])

    def run_task(
        self, method: Method, path: str, *, node: str, what: str, timeout: float = TASK_TIMEOUT, **params: Any
    ) -> None:
        """A call that starts a task, then its wait (an answer that is not a UPID ended synchronously)."""
        upid = self.request(method, path, **params)
        if isinstance(upid, str) and upid.startswith("UPID:"):
            self.wait_task(node, upid, timeout=timeout, what=what)
