"""Proxmox VE errors -> vmplane's CloudError tree, at one boundary (`Pve.request`).

PVE answers most refusals with HTTP 500 and a sentence ("... does not exist", "... already exists",
"can't lock file ..."), parameter errors with 400 and a message per field. The class is chosen from
the status and those sentences; only PVE's message is kept, never a request header or the token.
"""

from __future__ import annotations

import re
from typing import Any

from vmplane.clouds.errors import (
    AuthError,
    CloudError,
    ConflictError,
    DependencyViolationError,
    InvalidRequestError,
    NotFoundError,
    TransientError,
    UnreachableError,
    unreachable_reason,
)

_NOT_FOUND = re.compile(r"does not exist|no such|not found|unknown (vnet|zone|subnet|group)", re.I)
_EXISTS = re.compile(r"already exists|already defined|is already in use as", re.I)
# A config lock another task holds, a cluster file system hiccup, a node briefly out of quorum.
_TRANSIENT = re.compile(r"can't lock file|got timeout|timeout|cluster not ready|no quorum|temporarily", re.I)
_IN_USE = re.compile(r"is used by|still in use|is not empty|has (vms|members)|in use", re.I)
_RUNNING = re.compile(r"is running", re.I)
TRANSIENT_CODES = {502, 503, 504, 595, 596}  # 595/596: pveproxy could not reach the node


def _message(e: Any) -> tuple[int | None, str]:
    status = getattr(e, "status_code", None)
    content = str(getattr(e, "content", "") or getattr(e, "status_message", "") or e).strip()
    errors = getattr(e, "errors", None)
    if isinstance(errors, dict) and errors:
        content = f"{content} " + "; ".join(f"{k}: {str(v).strip()}" for k, v in sorted(errors.items()))
    return (int(status) if isinstance(status, int) else None), content


TOKEN_VARIABLES = "PROXMOX_TOKEN_ID and PROXMOX_TOKEN_SECRET"


def translate(e: Exception, operation: str, *, endpoint: str = "") -> CloudError:
    """`endpoint` (the API's URL) is named when nothing answers there or the token is refused."""
    if isinstance(e, CloudError):
        return e
    from proxmoxer.core import AuthenticationError, ResourceException

    at = f" at {endpoint}" if endpoint else ""
    if isinstance(e, AuthenticationError):
        return AuthError(f"the Proxmox VE API{at} refused the credentials", code="401", operation=operation)
    if not isinstance(e, ResourceException):
        import requests

        if isinstance(e, requests.exceptions.SSLError):
            return AuthError(
                f"the Proxmox VE API's TLS certificate{at} did not verify ({type(e).__name__}); give "
                "provider.caFile the PEM of the CA that signed it",
                code="TLSVerify",
                operation=operation,
            )
        why = unreachable_reason(e)
        if why is not None:  # a wrong provider.endpoint or a stopped pveproxy: not retried (Pve.request)
            return UnreachableError(f"cannot reach the Proxmox VE API {endpoint or ''}: {why}", operation=operation)
        if isinstance(e, OSError | requests.exceptions.ConnectionError | requests.exceptions.Timeout):
            return TransientError(
                f"cannot reach the Proxmox VE API {endpoint or ''}: {type(e).__name__}", operation=operation
            )
        return CloudError(f"{type(e).__name__}: {e}", operation=operation)
    status, message = _message(e)
    kw: dict[str, Any] = {"code": str(status), "operation": operation}
    if status == 401:  # the token id or secret is wrong (a missing privilege is a 403)
        return AuthError(f"the Proxmox VE API{at} refused the API token ({message}); check {TOKEN_VARIABLES}", **kw)
    if status == 403:
        return AuthError(message, **kw)
    if status in TRANSIENT_CODES or (status == 500 and _TRANSIENT.search(message)):
        return TransientError(message, **kw)
    if status == 400:
        return InvalidRequestError(message, **kw)
    if _NOT_FOUND.search(message) or status == 404:
        return NotFoundError(message, **kw)
    if _EXISTS.search(message):
        return ConflictError(message, **kw)
    if _RUNNING.search(message):
        return ConflictError(message, **kw)
    if _IN_USE.search(message):
        return DependencyViolationError(message, **kw)
    return CloudError(message, **kw)


def task_failed(what: str, exit_status: str, last_lines: list[str]) -> CloudError:
    """A task that ended in error (its HTTP call succeeded; the work did not)."""
    tail = " / ".join(line for line in last_lines if line.strip())
    message = f"{what} failed: {exit_status}" + (f" (task log: {tail})" if tail else "")
    if _NOT_FOUND.search(exit_status):
        return NotFoundError(message, code="TaskFailed")
    if _EXISTS.search(exit_status):
        return ConflictError(message, code="TaskFailed")
    if _TRANSIENT.search(exit_status):
        return TransientError(message, code="TaskFailed")
    return CloudError(message, code="TaskFailed")
