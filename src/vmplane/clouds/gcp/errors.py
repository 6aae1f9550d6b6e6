"""Google Cloud errors -> vmplane's CloudError tree, at one boundary (`GcpClients.call`).

Both SDKs answer in Google's error shape (`{"error": {"code", "message", "errors": [{"reason"}]}}`):
google-api-core raises a typed `GoogleAPICallError`, google-api-python-client an `HttpError` whose
body holds the same JSON. Only the code, reason and message are kept: never a request or a token.
"""

from __future__ import annotations

import json
from typing import Any

from vmplane.clouds.errors import (
    AuthError,
    CloudError,
    ConflictError,
    DependencyViolationError,
    InvalidRequestError,
    NotFoundError,
    QuotaError,
    TransientError,
    UnreachableError,
    endpoint_name,
    unreachable_reason,
)

# Reasons that mean "something still uses it": cleared as dependents are deleted, so retried in teardown.
# HTTP answers carry the lowercase reason, a compute Operation's `error.errors[].code` the upper-case one.
IN_USE = {
    "resourceInUseByAnotherResource",
    "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE",
    "resourceNotReady",
    "RESOURCE_NOT_READY",
    "inUse",
}
QUOTA = {"quotaExceeded", "QUOTA_EXCEEDED", "rateLimitExceeded", "userRateLimitExceeded"}
# A zone out of stock: no retry helps soon, another zone or machine type does.
CAPACITY = {"ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "zoneResourcePoolExhausted"}
TRANSIENT_CODES = {429, 500, 502, 503, 504}


def _parts(e: Exception) -> tuple[int | None, str | None, str]:
    """(HTTP status, first error reason, message) of either SDK's error, or (None, None, str(e))."""
    from google.api_core import exceptions as core

    if isinstance(e, core.GoogleAPICallError):
        reason = None
        for err in getattr(e, "errors", None) or []:
            if isinstance(err, dict) and err.get("reason"):
                reason = str(err["reason"])
                break
        reason = reason or getattr(e, "reason", None)
        code = e.code if isinstance(e.code, int) else None
        return code, reason, str(e.message)
    from googleapiclient.errors import HttpError

    if isinstance(e, HttpError):
        code = int(e.resp.status)
        reason, message = None, str(getattr(e, "reason", "") or e)
        try:
            body: Any = json.loads(e.content.decode() if isinstance(e.content, bytes) else e.content)
            err = body.get("error", {})
            message = str(err.get("message") or message)
            details = err.get("errors") or []
            if details and isinstance(details[0], dict):
                reason = details[0].get("reason")
            reason = reason or err.get("status")
        except (ValueError, AttributeError):
            pass
        return code, reason, message
    return None, None, str(e)


def translate(e: Exception, operation: str, *, endpoint: str = "", credentials: str = "") -> CloudError:
    """`endpoint` is the API's URL (named when nothing answers there), `credentials` where the credentials
    came from (named when Google refuses them): neither is ever a secret."""
    if isinstance(e, CloudError):
        return e
    code, reason, message = _parts(e)
    if code is None:
        return _without_http_answer(e, operation, message, endpoint=endpoint, credentials=credentials)
    kw: dict[str, Any] = {"code": reason or str(code), "operation": operation}
    if reason in IN_USE:
        return DependencyViolationError(message, **kw)
    if reason in QUOTA:
        return QuotaError(message, **kw) if code != 429 else TransientError(message, **kw)
    if code in TRANSIENT_CODES:
        return TransientError(message, **kw)
    if code in (401, 403):
        return AuthError(message, **kw)
    if code == 404:
        return NotFoundError(message, **kw)
    if code in (409, 412):
        return ConflictError(message, **kw)
    if code == 400:
        return InvalidRequestError(message, **kw)
    return CloudError(message, **kw)


def _without_http_answer(e: Exception, operation: str, message: str, *, endpoint: str, credentials: str) -> CloudError:
    """An error with no HTTP status: the token refresh refused, nothing answering, a timeout, or the SDK's own."""
    import requests
    from google.auth import exceptions as auth

    if isinstance(e, auth.RefreshError):  # the token endpoint refused the key (wrong, revoked, expired)
        said = str(e.args[0]) if e.args else type(e).__name__
        source = f" from {credentials}" if credentials else ""
        return AuthError(f"Google refused the credentials{source}: {said}", code="RefreshError", operation=operation)
    why = unreachable_reason(e)  # also httplib2's ServerNotFoundError, which is no OSError
    if why is None and not isinstance(e, OSError | requests.ConnectionError | requests.Timeout | auth.TransportError):
        return CloudError(message, operation=operation)
    if isinstance(e, auth.TransportError):  # refreshing the token failed, before the API was asked
        where = f"the token endpoint of the credentials from {credentials or 'Google'}"
    else:
        url = str(getattr(getattr(e, "request", None), "url", "") or endpoint)
        where = f"the Google Cloud endpoint {endpoint_name(url)}" if url else "Google Cloud"
    if why is not None:  # not transient: GcpClients.call does not retry it
        return UnreachableError(f"cannot reach {where}: {why}", operation=operation)
    return TransientError(f"cannot reach {where}: {type(e).__name__}", operation=operation)


def operation_error(op: Any, operation: str) -> CloudError:
    """The error a finished compute Operation carries (its HTTP call succeeded; the work did not)."""
    errors = list(op.error.errors) if op.error else []
    first = errors[0] if errors else None
    reason = first.code if first else None
    message = first.message if first else f"operation {op.name} failed"
    if reason in IN_USE:
        return DependencyViolationError(message, code=reason, operation=operation)
    if reason in CAPACITY:
        zone = str(op.zone).rstrip("/").rsplit("/", 1)[-1] if op.zone else "the requested zone"
        return QuotaError(
            f"zone {zone} has no capacity for {operation} ({reason}: {message}); "
            "use another zone or another machine type in the file, or apply again later",
            code=reason,
            operation=operation,
        )
    if reason in QUOTA:
        return QuotaError(message, code=reason, operation=operation)
    if reason in ("RESOURCE_NOT_FOUND", "notFound"):
        return NotFoundError(message, code=reason, operation=operation)
    if reason in ("RESOURCE_ALREADY_EXISTS", "alreadyExists"):
        return ConflictError(message, code=reason, operation=operation)
    return CloudError(message, code=reason, operation=operation)
