"""One Proxmox VE cluster's API for a driver: proxmoxer over HTTPS with an API token, call counts,
retries on transient errors, and task (UPID) polling.

Only the HTTPS API is used, never SSH to a node: what the API cannot do (upload a snippet) vmplane
does another way (a NoCloud ISO, `cloudinit_iso.py`). The token comes from the environment
(`PROXMOX_TOKEN_ID` = `user@realm!name`, `PROXMOX_TOKEN_SECRET`) and is never logged or put in an error.
"""

from __future__ import annotations

import ipaddress
import os
import random
import re
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from vmplane.clouds.base import count_call
from vmplane.clouds.errors import AuthError, DeadlineExceededError, DependencyViolationError, TransientError
from vmplane.clouds.faults import fault_hook
from vmplane.clouds.proxmox.api import Method, ProxmoxApi
from vmplane.clouds.proxmox.errors import translate
from vmplane.clouds.waits import note_retry
from vmplane.observe import calls

TOKEN_ID_ENV = "PROXMOX_TOKEN_ID"
TOKEN_SECRET_ENV = "PROXMOX_TOKEN_SECRET"
CALL_TIMEOUT = 60.0  # seconds per HTTP request
RETRY_DEADLINE = 120.0  # transient errors (resets, 502-504, a held config lock) are retried this long per call
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
        """An API on this machine (fakepve in the tests): the only place the crash tests' hook may act."""
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
    method, for the per-step tally, metrics and the crash tests' hook."""
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
        self._lock = threading.Lock()
        self._fault = fault_hook() if target.loopback else None  # the crash tests' hook (clouds/faults.py)

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
        """One API call: counted, translated into vmplane's CloudError tree, transient failures retried
        with jittered backoff to a deadline. `path` is positional-only: `PUT access/acl` has a `path` parameter."""
        name = call_name(method, path)
        deadline = time.monotonic() + RETRY_DEADLINE
        delay = 0.2
        span = calls.started("proxmox", name)
        retried: list[bool] = []
        while True:
            count_call(name)
            try:
                resource = self._client()(path.strip("/"))
                out = getattr(resource, method.lower())(**params)
            except Exception as e:
                err = translate(e, name, endpoint=self.target.endpoint)
                # "In use" is transient only to teardown, which retries it to its own deadline (deletes.py).
                if not isinstance(err, TransientError) or isinstance(err, DependencyViolationError):
                    calls.done("proxmox", name, span, retried=retried, error=err.code or type(err).__name__)
                    raise err from e
                if time.monotonic() + delay > deadline:
                    calls.done("proxmox", name, span, retried=retried, error=err.code or "unreachable")
                    raise DeadlineExceededError(f"gave up on {name} after {RETRY_DEADLINE:.0f}s: {err}") from e
                retried.append(False)
                note_retry(self.target.endpoint, str(err), len(retried), deadline=deadline)
                time.sleep(delay * random.uniform(0.5, 1.0))
                delay = min(delay * 2, 10.0)
                continue
            calls.done("proxmox", name, span, retried=retried)
            if self._fault is not None and method.upper() != "GET":
                self._fault.after(name)
            return out

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

        deadline = time.monotonic() + timeout
        delay = 0.1
        while True:
            status = self.get(f"nodes/{node}/tasks/{upid}/status")
            if status.get("status") == "stopped":
                exit_status = str(status.get("exitstatus", ""))
                if exit_status == "OK" or exit_status.startswith("WARNINGS"):
                    return
                log = self.get(f"nodes/{node}/tasks/{upid}/log", limit=50)
                lines = [str(e.get("t", "")) for e in log or [] if isinstance(e, dict)]
                raise task_failed(what, exit_status, lines[-5:])
            if time.monotonic() > deadline:
                raise DeadlineExceededError(f"{what} ({upid}) still running after {timeout:.0f}s on {node}")
            time.sleep(delay)
            delay = min(delay * 1.5, 3.0)

    def run_task(
        self, method: Method, path: str, *, node: str, what: str, timeout: float = TASK_TIMEOUT, **params: Any
    ) -> None:
        """A call that starts a task, then its wait (an answer that is not a UPID ended synchronously)."""
        upid = self.request(method, path, **params)
        if isinstance(upid, str) and upid.startswith("UPID:"):
            self.wait_task(node, upid, timeout=timeout, what=what)
