"""Translate botocore errors into vmplane's error tree, at one boundary (`aws_call`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    EndpointConnectionError,
    NoCredentialsError,
    ReadTimeoutError,
)
from botocore.parsers import ResponseParserError

from vmplane.clouds import errors as e

T = TypeVar("T")

_AUTH = {
    "AuthFailure",
    "UnauthorizedOperation",
    "AccessDenied",
    "AccessDeniedException",
    "InvalidClientTokenId",
    "ExpiredToken",
    "SignatureDoesNotMatch",
    "UnrecognizedClientException",
}
_THROTTLE = {
    "Throttling",
    "ThrottlingException",
    "RequestLimitExceeded",
    "TooManyRequestsException",
    "ServiceUnavailable",
    "InternalError",
    "InternalFailure",
    "RequestTimeout",
}
_CONFLICT = {
    "EntityAlreadyExists",
    "InvalidGroup.Duplicate",
    "AlreadyExists",
    "AlreadyExistsFault",
    "ConflictException",  # EventBridge Scheduler: a schedule of that name exists
    "InvalidLaunchTemplateName.AlreadyExistsException",
    "IncorrectState",
    "IncorrectInstanceState",
    "Resource.AlreadyAssociated",
    "InvalidPermission.Duplicate",
}
# "Something still uses this resource": clears as dependents go away, so a teardown retries it.
# ResourceInUse is ELBv2's and Auto Scaling's spelling, ResourceInUseException ACM's, DeleteConflict
# IAM's; an EIP still held by a NAT gateway's interface is InvalidIPAddress.InUse; an ASG that is
# still scaling is ScalingActivityInProgress.
_IN_USE = {
    "DependencyViolation",
    "DeleteConflict",
    "ResourceInUse",
    "ResourceInUseException",
    "InvalidIPAddress.InUse",
    "ScalingActivityInProgress",
}
# Codes whose resource has not appeared *yet* (eventual consistency right after a create):
# an instance whose SSM agent has not registered is InvalidInstanceId to SendCommand.
_NOT_YET = {"InvalidInstanceId"}
# Codes that say "no such thing" without NotFound in their name.
_NOT_FOUND = {"NoSuchEntity", "InvalidInstanceID.Malformed", "InvocationDoesNotExist"}
_QUOTA = {
    "LimitExceeded",
    "LimitExceededException",
    "AddressLimitExceeded",
    "VpcLimitExceeded",
    "InstanceLimitExceeded",
    "InsufficientInstanceCapacity",
    "NatGatewayLimitExceeded",
}


def translate(err: ClientError) -> e.CloudError:
    info = err.response.get("Error", {})
    status = int(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    code = str(info.get("Code", "Unknown"))
    message = str(info.get("Message", "")) or code
    if message.lstrip().startswith("<"):  # an HTML error page, not an AWS error: say what it was
        message = f"the endpoint failed with HTTP {status or 'error'} and no AWS error message"
    op = err.operation_name
    if code in _IN_USE:
        return e.DependencyViolationError(message, code=code, operation=op)
    if code in _NOT_YET:
        return e.TransientError(message, code=code, operation=op)
    if status == 501 or code in {"NotImplemented", "InvalidAction"}:
        return e.UnsupportedError(message, code=code, operation=op)
    if code in _AUTH:
        return e.AuthError(message, code=code, operation=op)
    if code in _THROTTLE or status >= 500:
        return e.TransientError(message, code=code, operation=op)
    if "NotFound" in code or code in _NOT_FOUND or _missing_by_message(code, message):
        return e.NotFoundError(message, code=code, operation=op)
    if code in _CONFLICT or "AlreadyExists" in code or "Duplicate" in code:
        return e.ConflictError(message, code=code, operation=op)
    if code in _QUOTA:
        return e.QuotaError(message, code=code, operation=op)
    return e.InvalidRequestError(message, code=code, operation=op)


def _missing_by_message(code: str, message: str) -> bool:
    """Services that report a missing resource only in the message, under a generic code: Auto Scaling
    answers ValidationError "AutoScalingGroup name not found - ..." for a group that is gone, and
    Route53 InvalidChangeBatch "... but it was not found" for a record deleted meanwhile. Classified
    here, once, so no call site reads message text."""
    text = message.lower()
    if code == "ValidationError":
        return "not found" in text
    if code == "InvalidChangeBatch":
        return "not found" in text and "tried to delete" in text
    return False


@contextmanager
def aws_errors() -> Iterator[None]:
    try:
        yield
    except ClientError as err:
        raise translate(err) from err
    except (EndpointConnectionError, ConnectionClosedError, ReadTimeoutError) as err:
        # Never echo the request (it may carry signed headers); the endpoint and reason are enough.
        raise e.TransientError(f"cannot reach the AWS endpoint: {type(err).__name__}") from err
    except NoCredentialsError as err:
        raise e.AuthError("no AWS credentials found (set a profile, or use --sandbox)") from err
    except ResponseParserError as err:
        # Not an AWS-shaped answer. On the sandbox this is how moto reports an unimplemented action.
        raise e.UnsupportedError(
            "the endpoint answered with something that is not an AWS response "
            "(on the sandbox: the emulator does not implement this call)"
        ) from err
    except BotoCoreError as err:
        raise e.CloudError(f"AWS SDK error: {type(err).__name__}") from err


def aws_call(fn: Callable[..., T], /, **kwargs: object) -> T:
    """Call one SDK operation with errors translated."""
    with aws_errors():
        return fn(**kwargs)
