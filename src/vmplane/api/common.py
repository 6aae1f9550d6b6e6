"""What the API's routes share: the jobs path, the error answers an operation declares in the OpenAPI
document, the authenticated caller, and the error raised to answer with a status and a message."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi import HTTPException
from sqlalchemy.orm.exc import StaleDataError

from vmplane.api.schemas import ErrorBody
from vmplane.clouds.errors import CloudError
from vmplane.errors import VmplaneError
from vmplane.jobs.tokens import Role

JOBS = "/provisioning-jobs"

_ERRORS = {
    400: "The request is malformed at the HTTP level (a header or body the server cannot read).",
    401: "No bearer token, or an invalid or revoked one.",
    403: "The token's role or org does not allow this.",
    404: "No such job (or token) in the caller's org.",
    409: "The job's state forbids this now, or the environment already has a job.",
    412: "`If-Match` does not name the job's current version (ETag).",
    422: "The body or a query parameter is invalid, or the change cannot be made in place.",
    502: "The cloud could not be asked (unreachable, or it refused vmplane's credentials); nothing was recorded.",
}


def errors(*codes: int, auth: bool = True, **described: str) -> dict[int | str, dict[str, Any]]:
    """The error answers an operation declares in the OpenAPI document, each with the error body: 400,
    401 and 403 (unless the operation needs no token), and `codes`. `described`: an operation's own
    wording of a status (`e409="..."`)."""
    common = (400, 401, 403) if auth else (400,)
    return {
        code: {"model": ErrorBody, "description": described.get(f"e{code}", _ERRORS[code])}
        for code in (*common, *codes)
    }


class Caller:
    def __init__(self, org: str, role: Role, token_id: str) -> None:
        self.org, self.role, self.token_id = org, role, token_id


def problem(status: int, detail: str, **extra: Any) -> HTTPException:
    return HTTPException(status_code=status, detail={"message": detail, **extra})


@contextmanager
def domain_errors(if_match: bool = False) -> Iterator[None]:
    """Every domain error answers with the HTTP status its class carries (vmplane/errors.py)."""
    try:
        yield
    except StaleDataError:
        # Another writer committed between our read and our write; ours was not applied.
        status = 412 if if_match else 409
        raise problem(status, "the job changed while this request ran; read it again and retry") from None
    except VmplaneError as err:
        if isinstance(err, CloudError):
            raise  # a cloud failure inside a request is the server's problem, logged by the handler
        raise problem(err.http_status, str(err)) from None


@contextmanager
def cloud_errors() -> Iterator[None]:
    """Where a request reads the cloud (drift, an update's refresh): a cloud that cannot be read is 502,
    and nothing was recorded (the read comes before any write)."""
    try:
        yield
    except CloudError as err:
        raise problem(502, f"the cloud could not be read; nothing was recorded: {err}") from None
