"""The generated stack's remote state: one S3 object per environment, created with a conditional put
(Google Cloud's, in Cloud Storage, is state_gcs.py).

`If-None-Match: *` makes the create atomic on S3's side: if any object already exists at the key, the
put fails and nothing is overwritten, so two stacks for the same org/env (or a second `state init`)
can never share or clobber one state. Terraform's own S3 lock file (`use_lockfile`) uses the same
mechanism for locking.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from vmplane.clouds.aws.errors import aws_errors
from vmplane.clouds.aws.session import AwsClients, AwsTarget
from vmplane.clouds.errors import CloudError, NotFoundError
from vmplane.envspec.models import Cloud, EnvSpec
from vmplane.errors import StateConflictError, UsageError

if TYPE_CHECKING:
    from types_boto3_s3.literals import BucketLocationConstraintType

    from vmplane.tf.state_gcs import GcsLocation


class StateExistsError(StateConflictError):
    """Another stack (or an earlier init) already owns the state object; nothing was written."""


@dataclass(frozen=True)
class StateLocation:
    bucket: str
    key: str
    region: str

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    note = "empty state; conditional put, nothing overwritten"

    def report(self) -> dict[str, object]:
        return {"bucket": self.bucket, "key": self.key, "region": self.region}


def location(spec: EnvSpec) -> StateLocation:
    assert spec.state is not None
    return StateLocation(
        bucket=spec.state.bucket,
        key=f"vmplane/{spec.org}/{spec.name}/terraform.tfstate",
        region=spec.state.region or spec.provider.region,
    )


def empty_state(lineage: str) -> str:
    """A valid empty Terraform state (format 4): `terraform init` adopts it as is."""
    doc = {"version": 4, "serial": 0, "lineage": lineage, "outputs": {}, "resources": [], "check_results": None}
    return json.dumps(doc, indent=2) + "\n"


def init_state(aws: AwsClients, spec: EnvSpec) -> StateLocation:
    """Create the bucket if needed (private, versioned, encrypted) and the state object, never overwriting."""
    loc = location(spec)
    s3 = aws.s3
    with aws_errors():
        try:
            s3.head_bucket(Bucket=loc.bucket)
        except s3.exceptions.ClientError as err:
            if err.response.get("Error", {}).get("Code") not in ("404", "NoSuchBucket", "NotFound"):
                raise
            if loc.region == "us-east-1":  # the one region S3 refuses a LocationConstraint for
                s3.create_bucket(Bucket=loc.bucket)
            else:
                # Any region the file names: the stubs list today's regions, S3 itself refuses an unknown one.
                region = cast("BucketLocationConstraintType", loc.region)
                s3.create_bucket(Bucket=loc.bucket, CreateBucketConfiguration={"LocationConstraint": region})
            s3.put_public_access_block(
                Bucket=loc.bucket,
                PublicAccessBlockConfiguration={
                    "BlockPublicAcls": True,
                    "IgnorePublicAcls": True,
                    "BlockPublicPolicy": True,
                    "RestrictPublicBuckets": True,
                },
            )
            s3.put_bucket_versioning(Bucket=loc.bucket, VersioningConfiguration={"Status": "Enabled"})
    try:
        with aws_errors():
            s3.put_object(
                Bucket=loc.bucket,
                Key=loc.key,
                Body=empty_state(str(uuid.uuid4())).encode(),
                ContentType="application/json",
                ServerSideEncryption="AES256",
                IfNoneMatch="*",  # the conditional put: fails if anything exists at the key
            )
    except CloudError as err:
        if err.code in ("PreconditionFailed", "ConditionalRequestConflict"):
            raise StateExistsError(
                f"{loc.url} already exists: the state of {spec.org}/{spec.name} belongs to an existing stack; "
                "nothing was overwritten (use that stack, or destroy it and delete the object first)"
            ) from err
        raise
    return loc


def init_state_for(spec: EnvSpec, sandbox_endpoint: str | None) -> StateLocation | GcsLocation:
    """`init_state` (or, for a GCP file, `state_gcs.init_state_gcs`) with the clients built here: callers
    above the cloud layer (the CLI) pass the spec and, for the sandbox, its endpoint; the state bucket's
    region wins over the provider's."""
    assert spec.state is not None
    if spec.provider.cloud is Cloud.gcp:
        from vmplane.tf.state_gcs import init_state_gcs

        return init_state_gcs(spec, sandbox_endpoint)
    if spec.provider.cloud is not Cloud.aws:
        raise UsageError(
            f"tf state init keeps state in S3 (AWS) or Cloud Storage (Google Cloud); {spec.provider.cloud.value} "
            "has no generated stack"
        )
    if spec.state.location:
        raise UsageError("state.location is a Cloud Storage bucket's; on AWS the bucket's region is state.region")
    target = AwsTarget(
        region=spec.state.region or spec.provider.region,
        # The sandbox takes any credentials; a named profile would only be looked up and fail there.
        profile=None if sandbox_endpoint else spec.provider.profile,
        endpoint_url=sandbox_endpoint,
    )
    return init_state(AwsClients(target), spec)


def state_exists(aws: AwsClients, spec: EnvSpec) -> bool:
    loc = location(spec)
    try:
        with aws_errors():
            aws.s3.head_object(Bucket=loc.bucket, Key=loc.key)
    except CloudError as err:
        if isinstance(err, NotFoundError) or err.code in ("404", "NoSuchKey", "NoSuchBucket"):
            return False
        raise
    return True
