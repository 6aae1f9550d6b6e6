"""The GCP stack's remote state: a Cloud Storage bucket and one object per environment, written once.

Terraform's gcs backend keeps workspace `W` at `<prefix>/W.tfstate` and locks it with `<prefix>/W.tflock`
(itself created with `ifGenerationMatch=0`), so the object made here is `<prefix>/default.tfstate`, the
one `terraform init` reads. `ifGenerationMatch=0` makes the create atomic on Cloud Storage's side, as
`If-None-Match: *` does on S3: a second init, or another stack for the same org/env, is refused and the
object's generation stays what it was.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from vmplane.clouds.gcp.spec import GcpProvider
from vmplane.clouds.tags import gcp_label_key, gcp_labels
from vmplane.envspec.models import EnvSpec
from vmplane.errors import UsageError

ROLE = "tfstate"


@dataclass(frozen=True)
class GcsLocation:
    bucket: str
    prefix: str
    location: str  # where a bucket made by `tf state init` goes (an adopted one keeps its own)
    note: str = ""  # after init: what was done to the bucket
    bucket_created: bool | None = None  # after init: made (True) or adopted (False)
    bucket_changed: tuple[str, ...] = ()  # after init: the settings adoption set

    @property
    def key(self) -> str:
        return f"{self.prefix}/default.tfstate"

    @property
    def lock_key(self) -> str:
        return f"{self.prefix}/default.tflock"

    @property
    def url(self) -> str:
        return f"gs://{self.bucket}/{self.key}"

    def report(self) -> dict[str, object]:
        out: dict[str, object] = {"bucket": self.bucket, "key": self.key, "location": self.location}
        if self.bucket_created is not None:
            out.update(bucketCreated=self.bucket_created, bucketChanged=list(self.bucket_changed))
        return out


def location(spec: EnvSpec) -> GcsLocation:
    assert spec.state is not None
    return GcsLocation(
        bucket=spec.state.bucket,
        prefix=f"vmplane/{spec.org}/{spec.name}",
        location=spec.state.location or spec.provider.region,
    )


def bucket_labels(spec: EnvSpec) -> dict[str, str]:
    """vmplane's labels for the state bucket: the org's (the bucket holds every environment of the org,
    so no env or job label), its role, and the user's tags, folded as on every GCP resource."""
    from vmplane.clouds.base import MANAGED_BY

    p = spec.tag_prefix
    return gcp_labels({**spec.tags, f"{p}orgId": spec.org, f"{p}managedBy": MANAGED_BY, f"{p}role": ROLE})


def init_state_gcs(spec: EnvSpec, sandbox_endpoint: str | None) -> GcsLocation:
    """Create or adopt the bucket, then write an empty state at `<prefix>/default.tfstate`, never overwriting."""
    # Imported here: `tf generate` needs only `location`, not the Google client libraries.
    from vmplane.clouds.gcp import state_bucket
    from vmplane.clouds.gcp.session import GcpClients, GcpTarget
    from vmplane.tf.state import StateExistsError, empty_state

    assert spec.state is not None
    if spec.state.region:
        raise UsageError("state.region is the S3 bucket's region; on Google Cloud use state.location")
    provider = spec.provider
    assert isinstance(provider, GcpProvider)
    loc = location(spec)
    clients = GcpClients(GcpTarget(project=provider.project, region=provider.region, endpoint_url=sandbox_endpoint))
    svc = state_bucket.storage(clients)
    owner = gcp_label_key(f"{spec.tag_prefix}orgId")
    bucket = state_bucket.ensure_bucket(clients, svc, loc.bucket, loc.location, bucket_labels(spec), owner)
    data = empty_state(str(uuid.uuid4())).encode()
    try:
        state_bucket.create_object(clients, svc, loc.bucket, loc.key, data, "application/json")
    except state_bucket.ObjectExistsError as err:
        raise StateExistsError(
            f"{loc.url} already exists (generation {err.generation}): the state of {spec.org}/{spec.name} belongs "
            "to an existing stack; nothing was overwritten (use that stack, or destroy it and delete the object "
            "first)"
        ) from err
    if bucket.created:
        what = f"bucket gs://{loc.bucket} created in {bucket.location}"
    elif bucket.changed:
        what = f"bucket gs://{loc.bucket} adopted, set: {', '.join(bucket.changed)}"
    else:
        what = f"bucket gs://{loc.bucket} adopted as it was"
    note = f"{what}; uniform access, public access prevention, versioning on; ifGenerationMatch=0"
    return GcsLocation(
        loc.bucket, loc.prefix, bucket.location or loc.location, note, bucket.created, tuple(bucket.changed)
    )
