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
