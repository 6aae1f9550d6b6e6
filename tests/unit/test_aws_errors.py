"""clouds/aws/errors.py: botocore errors become vmplane's typed error tree at one boundary."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

from vmplane.clouds import errors as e
from vmplane.clouds.aws.errors import aws_call, translate


def client_error(code: str, status: int = 400, message: str = "boom", operation: str = "CreateVpc") -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}},
        operation,
    )


@pytest.mark.parametrize(
    ("code", "status", "cls", "retryable"),
    [
        ("DependencyViolation", 400, e.DependencyViolationError, True),
        ("DeleteConflict", 409, e.DependencyViolationError, True),  # IAM's spelling
        ("Throttling", 400, e.TransientError, True),
        ("RequestLimitExceeded", 503, e.TransientError, True),
        ("SlowDown", 503, e.TransientError, True),  # any 5xx, whatever the code
        ("InternalError", 500, e.TransientError, True),
        ("InvalidVpcID.NotFound", 400, e.NotFoundError, False),
        ("InvalidInstanceID.Malformed", 400, e.NotFoundError, False),
        ("NoSuchEntity", 404, e.NotFoundError, False),
        ("EntityAlreadyExists", 409, e.ConflictError, False),
        ("InvalidPermission.Duplicate", 400, e.ConflictError, False),
        ("RouteAlreadyExists", 400, e.ConflictError, False),
        ("IncorrectState", 400, e.ConflictError, False),
        ("VpcLimitExceeded", 400, e.QuotaError, False),
        # EC2 answers a stock-out with HTTP 500: a capacity error, not a transient 5xx (was TransientError).
        ("InsufficientInstanceCapacity", 500, e.CapacityError, False),
        ("UnauthorizedOperation", 403, e.AuthError, False),
        ("ExpiredToken", 400, e.AuthError, False),
        ("InvalidAction", 400, e.UnsupportedError, False),
        ("SomethingNobodyHasSeen", 400, e.InvalidRequestError, False),
        ("InvalidParameterValue", 400, e.InvalidRequestError, False),
    ],
)
def test_translate_maps_codes_to_classes(code, status, cls, retryable):
    err = translate(client_error(code, status))
    assert type(err) is cls
    assert err.retryable is retryable
    assert err.code == code
    assert err.operation == "CreateVpc"


def test_translated_error_reads_operation_message_and_code():
    err = translate(client_error("InvalidVpcID.NotFound", message="The vpc ID 'vpc-1' does not exist"))
    assert str(err) == "CreateVpc: The vpc ID 'vpc-1' does not exist [InvalidVpcID.NotFound]"


def test_translate_without_a_message_falls_back_to_the_code():
    err = translate(ClientError({"Error": {"Code": "VpcLimitExceeded"}}, "CreateVpc"))
    assert isinstance(err, e.QuotaError)
    assert err.args[0] == "VpcLimitExceeded"


def test_dependency_violation_is_a_transient_error():
    # Teardown relies on this: waits.retry retries it without an explicit retry_on.
    assert issubclass(e.DependencyViolationError, e.TransientError)
    assert isinstance(translate(client_error("DependencyViolation")), e.TransientError)


def test_http_501_not_implemented_is_unsupported_not_retryable():
    err = translate(client_error("NotImplemented", 501, operation="GetInstanceProfile"))
    assert isinstance(err, e.UnsupportedError)
    assert err.retryable is False


def test_aws_call_translates_and_chains_the_client_error():
    original = client_error("InvalidVpcID.NotFound")

    def fail(**kwargs):
        assert kwargs == {"VpcIds": ["vpc-1"]}
        raise original

    with pytest.raises(e.NotFoundError) as caught:
        aws_call(fail, VpcIds=["vpc-1"])
    assert caught.value.__cause__ is original


def test_aws_call_returns_the_result_untouched():
    assert aws_call(lambda **kw: {"echo": kw}, A=1) == {"echo": {"A": 1}}


def test_connection_errors_are_transient_and_do_not_echo_the_request():
    def fail(**_):
        raise EndpointConnectionError(endpoint_url="https://ec2.us-east-1.amazonaws.com/?X-Amz-Signature=secret")

    with pytest.raises(e.TransientError) as caught:
        aws_call(fail)
    assert caught.value.retryable
    assert "secret" not in str(caught.value)


def test_missing_credentials_is_an_auth_error():
    def fail(**_):
        raise NoCredentialsError()

    with pytest.raises(e.AuthError, match="no AWS credentials"):
        aws_call(fail)


@pytest.mark.parametrize(
    ("code", "message", "operation", "cls"),
    [
        # Auto Scaling reports a missing group only in the message (B: a crash after DeleteAutoScalingGroup).
        ("ValidationError", "AutoScalingGroup name not found - null", "UpdateAutoScalingGroup", e.NotFoundError),
        ("ValidationError", "Max bound, 1, must be >= min bound, 2", "UpdateAutoScalingGroup", e.InvalidRequestError),
        (
            "InvalidChangeBatch",
            "Tried to delete resource record set [name='a.example.', type='A'] but it was not found",
            "ChangeResourceRecordSets",
            e.NotFoundError,
        ),
        (
            "InvalidChangeBatch",
            "RRSet of type CNAME with DNS name a. is not permitted",
            "ChangeResourceRecordSets",
            e.InvalidRequestError,
        ),
        # "In use" in every service's spelling is one class, retried by teardowns (D).
        (
            "ResourceInUse",
            "Target group is currently in use by a listener",
            "DeleteTargetGroup",
            e.DependencyViolationError,
        ),
        ("ResourceInUseException", "Certificate is in use", "DeleteCertificate", e.DependencyViolationError),
        ("InvalidIPAddress.InUse", "Address is in use", "ReleaseAddress", e.DependencyViolationError),
        ("ScalingActivityInProgress", "activity in progress", "DeleteAutoScalingGroup", e.DependencyViolationError),
        # SSM: an agent not registered yet (still booting), an invocation not visible yet.
        ("InvalidInstanceId", "Instances not in a valid state", "SendCommand", e.TransientError),
        ("InvocationDoesNotExist", "", "GetCommandInvocation", e.NotFoundError),
    ],
)
def test_translate_classifies_service_specific_spellings(code, message, operation, cls):
    err = translate(client_error(code, message=message, operation=operation))
    assert type(err) is cls
    assert err.code == code and err.operation == operation


def test_in_use_is_not_a_conflict():
    # Callers retry DependencyViolationError; a ConflictError (already exists) must never be retried.
    assert not isinstance(translate(client_error("ResourceInUse")), e.ConflictError)


def test_a_capacity_error_keeps_awss_sentence_and_adds_the_fix() -> None:
    """The 500 answer AWS sends (https://github.com/galaxyproject/cloudman/issues/64): the zone it names and
    vmplane's fix are both in the message; not retryable (the old driver retried it for two minutes)."""
    said = (
        "We currently do not have sufficient c4.4xlarge capacity in the Availability Zone you requested "
        "(us-east-1c). Our system will be working on provisioning additional capacity."
    )
    err = translate(client_error("InsufficientInstanceCapacity", 500, said))
    assert isinstance(err, e.CapacityError) and not err.retryable
    assert "(us-east-1c)" in str(err) and e.CAPACITY_FIX in str(err)
