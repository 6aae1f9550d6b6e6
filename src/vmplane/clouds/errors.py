"""One typed error tree for every cloud; drivers translate SDK errors into it at one boundary."""

from __future__ import annotations

from vmplane.errors import VmplaneError


class CloudError(VmplaneError):
    """Base of every cloud failure. `retryable` marks errors worth another attempt."""

    retryable = False
    http_status = 502  # the cloud, not the caller, failed

    def __init__(self, message: str, *, code: str | None = None, operation: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.operation = operation

    def __str__(self) -> str:
        where = f"{self.operation}: " if self.operation else ""
        code = f" [{self.code}]" if self.code else ""
        return f"{where}{self.args[0]}{code}"


class AuthError(CloudError):
    """Credentials missing, expired or not allowed to do this."""


class NotFoundError(CloudError):
    """The resource does not exist (anymore)."""


class ConflictError(CloudError):
    """The resource already exists or is in a state that forbids the call."""


class QuotaError(CloudError):
    """An account limit was reached; retrying will not help until it is raised."""


class InvalidRequestError(CloudError):
    """The request is wrong (bad parameter, unknown image, ...)."""


class TransientError(CloudError):
    """Throttling, 5xx, connection reset, eventual consistency: try again later."""

    retryable = True


class DependencyViolationError(TransientError):
    """Something still depends on the resource; in teardown this clears as dependents go away."""


class UnsupportedError(CloudError):
    """The endpoint does not implement this API (e.g. the sandbox's emulator)."""


class ProviderInvalidError(CloudError):
    """The provider cannot run this job at all (a clean `Invalid` answer, e.g. Azure before GA)."""


class DeadlineExceededError(CloudError):
    """A wait ran out of time."""


class UnreachableError(CloudError):
    """Nothing answers at the endpoint: the connection was refused or its host name does not resolve.
    A wrong URL or a stopped service, not a hiccup: retrying would only delay the same answer, so it is
    not retryable (a timeout or a reset stays a TransientError)."""


def unreachable_reason(exc: BaseException) -> str | None:
    """Why nothing answered, if `exc` (or what it wraps) says so: "connection refused" or "host name does
    not resolve"; None for every other failure (a timeout, a reset, a TLS error, an HTTP answer).

    The SDKs wrap the socket error differently (requests in urllib3's MaxRetryError, botocore in an
    EndpointConnectionError's `error`, httplib2 not at all), so the chain, `reason`, `error` and args are
    all followed."""
    seen: set[int] = set()
    todo: list[object] = [exc]
    while todo:
        cur = todo.pop()
        if not isinstance(cur, BaseException) or id(cur) in seen:
            continue
        seen.add(id(cur))
        name = type(cur).__name__
        if isinstance(cur, ConnectionRefusedError):
            return "connection refused"
        # socket.gaierror, urllib3's NameResolutionError, httplib2's ServerNotFoundError.
        if name in ("gaierror", "NameResolutionError", "ServerNotFoundError"):
            return "host name does not resolve"
        if isinstance(cur, TimeoutError) or "Timeout" in name:
            return None  # a timeout is transient even when something below it is a refused retry
        kwargs = getattr(cur, "kwargs", None)
        todo += [cur.__cause__, cur.__context__, getattr(cur, "reason", None), *cur.args]
        if isinstance(kwargs, dict):
            todo.append(kwargs.get("error"))
    return None


def endpoint_name(url: str) -> str:
    """A URL as an error may show it: scheme, host, port and path, never the query (a presigned URL's
    signature) or user info."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if not parts.hostname:
        return url.split("?", 1)[0]
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname}{port}{parts.path}"


class CapacityError(QuotaError):
    """The zone has no capacity for the instance type now (a stock-out): not retried, since it lasts
    minutes to hours; the message names the zone and the fix."""


CAPACITY_FIX = (
    "the job failed and resumes where it stopped: run `vmplane apply` again later, or choose another "
    "instance type for the pool (pools.<name>.instanceType) or another zone"
)


def capacity_error(message: str, *, code: str, operation: str | None, zone: str | None) -> CapacityError:
    """The cloud's own sentence (it names the zone), the zone again if it did not, and the fix."""
    where = "" if not zone or zone in message else f" (zone {zone})"
    return CapacityError(f"{message.rstrip()}{where}; {CAPACITY_FIX}", code=code, operation=operation)
