"""Translate botocore errors into vmplane's error tree, at one boundary (`aws_call`, and `aws_errors` around
building a session or a client)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    CredentialRetrievalError,
    EndpointConnectionError,
    NoCredentialsError,
    PartialCredentialsError,
    ProfileNotFound,
    ReadTimeoutError,
    SSOError,
    TokenRetrievalError,
)
from botocore.parsers import ResponseParserError

from vmplane.clouds import errors as e

T = TypeVar("T")

# Where botocore's default chain looks, for the message that says it found nothing (no value is ever shown).
DEFAULT_CHAIN = (
    "env AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, ~/.aws/credentials, ~/.aws/config, provider.profile or "
    "AWS_PROFILE, an SSO login, an instance or container role"
)
# The codes AWS answers for keys it does not accept (as opposed to keys it accepts without the permission):
# the message then says where the keys came from (`VmplaneCredentials`, set by the session's after-call hook).
BAD_CREDENTIALS = frozenset(
    {
        "AuthFailure",
        "InvalidClientTokenId",
        "SignatureDoesNotMatch",
        "UnrecognizedClientException",
        "ExpiredToken",
        "ExpiredTokenException",
        "InvalidAccessKeyId",
    }
)

_AUTH = {
    "AuthFailure",
    "UnauthorizedOperation",
    "AccessDenied",
    "AccessDeniedException",
    "InvalidClientTokenId",
    "ExpiredToken",
    "ExpiredTokenException",
    "InvalidAccessKeyId",
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
# A stock-out in the zone: EC2 answers it with HTTP 500, so it must be told apart before the 5xx rule.
# https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html (a server error code)
_CAPACITY = {"InsufficientInstanceCapacity", "InsufficientHostCapacity", "InsufficientCapacity"}
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
    "NatGatewayLimitExceeded",
}


def translate(err: ClientError) -> e.CloudError:
    # A Mapping, not the stubs' TypedDict: the session adds VmplaneCredentials to it (session.py).
    info: Mapping[str, Any] = err.response.get("Error", {})
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
    if code in BAD_CREDENTIALS and info.get("VmplaneCredentials"):
        return e.AuthError(
            f"AWS refused the credentials from {info['VmplaneCredentials']}: {message}", code=code, operation=op
        )
    if code in _AUTH:
        return e.AuthError(message, code=code, operation=op)
    if code in _CAPACITY:
        zone = re.search(r"\(([a-z]{2}-[a-z]+-\d[a-z])\)", message)
        return e.capacity_error(message, code=code, operation=op, zone=zone.group(1) if zone else None)
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


def profile_not_found(profile: str, source: str = "provider.profile or AWS_PROFILE") -> e.AuthError:
    """A named profile that is in neither AWS file (botocore's ProfileNotFound, as one line)."""
    config = os.environ.get("AWS_CONFIG_FILE", "~/.aws/config")
    credentials = os.environ.get("AWS_SHARED_CREDENTIALS_FILE", "~/.aws/credentials")
    return e.AuthError(
        f"AWS profile {profile!r} ({source}) is not in {config} (nor {credentials}): "
        f"`aws configure --profile {profile}` or `aws configure sso` adds it",
        code="ProfileNotFound",
    )


def _endpoint_of(err: BotoCoreError) -> str:
    return e.endpoint_name(str(err.kwargs.get("endpoint_url", ""))) or "(unknown)"


@contextmanager
def aws_errors() -> Iterator[None]:
    """botocore's errors as vmplane's, each one line: the endpoint, profile or variable it is about, never a
    request (it may carry signed headers) or a credential."""
    try:
        yield
    except ClientError as err:
        raise translate(err) from err
    except EndpointConnectionError as err:
        where = _endpoint_of(err)
        why = e.unreachable_reason(err)
        if why is not None:  # refused or unresolvable: the session did not retry it (session._fail_fast)
            raise e.UnreachableError(f"cannot reach the AWS endpoint {where}: {why}") from err
        raise e.TransientError(f"cannot reach the AWS endpoint {where}: {type(err).__name__}") from err
    except (ConnectionClosedError, ReadTimeoutError, ConnectTimeoutError) as err:
        raise e.TransientError(f"cannot reach the AWS endpoint {_endpoint_of(err)}: {type(err).__name__}") from err
    except ProfileNotFound as err:
        raise profile_not_found(str(err.kwargs.get("profile", ""))) from err
    except NoCredentialsError as err:
        raise e.AuthError(f"no AWS credentials found (the default chain: {DEFAULT_CHAIN}); or use --sandbox") from err
    except (PartialCredentialsError, CredentialRetrievalError, TokenRetrievalError, SSOError) as err:
        # botocore's own sentences name the provider and the missing variable, never a value.
        raise e.AuthError(f"AWS could not load the credentials ({err})", code=type(err).__name__) from err
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
