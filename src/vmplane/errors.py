"""One base for vmplane's domain errors: each class carries the CLI exit code and the HTTP status it
maps to, so the CLI and the API answer the same error the same way (one handler each)."""

from __future__ import annotations

EXIT_FAILED, EXIT_USAGE = 1, 2


class VmplaneError(Exception):
    """A failure the user can act on; `str()` is the one line shown (never a credential)."""

    exit_code = EXIT_FAILED
    http_status = 500


class UsageError(VmplaneError):
    """The request is wrong as asked (bad file, bad argument); nothing was created."""

    exit_code = EXIT_USAGE
    http_status = 422


class NotFoundInStoreError(VmplaneError):
    """A job or environment that vmplane has no record of."""

    exit_code = EXIT_USAGE
    http_status = 404


class StateConflictError(VmplaneError):
    """The record's state forbids the request (e.g. an active job for the same environment)."""

    exit_code = EXIT_USAGE
    http_status = 409


class StalePreconditionError(VmplaneError):
    """The caller's `If-Match` version is not the record's current version."""

    exit_code = EXIT_USAGE
    http_status = 412
