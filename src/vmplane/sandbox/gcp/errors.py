"""Google's error shape (`{"error": {"code", "message", "errors": [...], "status"}}`), as the clients parse it."""

from __future__ import annotations

from typing import Any

_STATUS = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    409: "ALREADY_EXISTS",
    412: "FAILED_PRECONDITION",
    500: "INTERNAL",
}


class ApiError(Exception):
    """An answer in Google's error shape; raised anywhere below the HTTP handler."""

    def __init__(self, code: int, reason: str, message: str, status: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.status = status or _STATUS.get(code, "UNKNOWN")

    def body(self) -> dict[str, Any]:
        error = {"message": self.message, "domain": "global", "reason": self.reason}
        return {"error": {"code": self.code, "message": self.message, "errors": [error], "status": self.status}}


def invalid(message: str) -> ApiError:
    return ApiError(400, "invalid", message)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "badRequest", message)


def not_found(resource: str) -> ApiError:
    return ApiError(404, "notFound", f"The resource '{resource}' was not found")


def already_exists(resource: str) -> ApiError:
    return ApiError(409, "alreadyExists", f"The resource '{resource}' already exists")


def in_use(kind: str, resource: str, user: str) -> ApiError:
    return ApiError(
        400,
        "resourceInUseByAnotherResource",
        f"The {kind} resource '{resource}' is already being used by '{user}'",
    )


def condition_not_met(message: str) -> ApiError:
    return ApiError(412, "conditionNotMet", message)


def sandbox_bug(message: str) -> ApiError:
    """Our own response broke the discovery schema: a bug in the sandbox, never the caller's fault."""
    return ApiError(500, "backendError", f"sandbox bug: {message}")
