"""A Cloud Storage bucket for a Terraform stack's state, and its state object written once.

Through google-api-python-client's bundled storage v1 discovery document, every call through
`GcpClients.call` (counted, deadlines, transient errors retried). The bucket is created, or adopted
when it already exists in the target's project: uniform bucket-level access, public access
prevention enforced, versioning on (every state Terraform writes stays recoverable) and vmplane's
labels, each set only where it differs. A bucket of another project, or labelled for another org, is
refused. The object is written with `ifGenerationMatch=0`, so Cloud Storage itself refuses it if any
live object exists at the key: nothing is ever overwritten.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from vmplane.clouds.errors import AuthError, ConflictError, NotFoundError
from vmplane.clouds.gcp.session import CALL_TIMEOUT, GcpClients
from vmplane.errors import UsageError

# Set on the bucket when created; checked, and set where they differ, when it is adopted.
SETTINGS: dict[str, Any] = {
    "iamConfiguration": {"uniformBucketLevelAccess": {"enabled": True}, "publicAccessPrevention": "enforced"},
    "versioning": {"enabled": True},
}


class ObjectExistsError(ConflictError):
    """A live object is at the key (the ifGenerationMatch=0 write was refused); nothing was written."""

    def __init__(self, message: str, generation: str) -> None:
        super().__init__(message, code="conditionNotMet", operation="storage.objects.insert")
        self.generation = generation


@dataclass(frozen=True)
class Bucket:
    name: str
    location: str
    created: bool  # False: an existing bucket of the project was adopted
    changed: list[str] = field(default_factory=list)  # what adoption set: "versioning", "labels", ...


def storage(clients: GcpClients) -> Any:
    """The storage v1 service for the target. On the sandbox the document's rootUrl is the sandbox's own:
    with `api_endpoint` googleapiclient swaps only the host of a media upload's URL and keeps https."""
    import google_auth_httplib2
    import httplib2
    from googleapiclient import discovery, discovery_cache

    doc = json.loads(discovery_cache.get_static_doc("storage", "v1") or "{}")
    if clients.target.endpoint_url:
        doc["rootUrl"] = clients.target.endpoint_url.rstrip("/") + "/"
    creds = clients._creds()  # the target's credentials, as every GCP client gets them: anonymous on the sandbox
    http = google_auth_httplib2.AuthorizedHttp(creds, http=httplib2.Http(timeout=CALL_TIMEOUT))
    return discovery.build_from_document(doc, http=http)


def _in_project(clients: GcpClients, svc: Any, name: str) -> bool:
    """Whether the bucket belongs to the target's project (a bucket name is global, its project is not)."""
    found = clients.call(
        "storage.buckets.list",
        lambda: svc.buckets().list(project=clients.project, prefix=name, fields="items(name)").execute(),
    )
    return any(b.get("name") == name for b in found.get("items", []))


def _get(clients: GcpClients, svc: Any, name: str) -> dict[str, Any] | None:
    try:
        got: dict[str, Any] = clients.call("storage.buckets.get", lambda: svc.buckets().get(bucket=name).execute())
    except NotFoundError:
        return None
    except AuthError as err:
        if err.code != "forbidden":  # 401: the credentials themselves are wrong, not the bucket's owner
            raise
        raise UsageError(
            f"gs://{name} exists but these credentials cannot read it ({err.code}): it belongs to another "
            "project or account, or they lack storage.buckets.get; pick another state.bucket"
        ) from err
    return got


def _differences(bucket: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    """The patch that brings an existing bucket to SETTINGS and vmplane's labels (empty: nothing to do)."""
    patch: dict[str, Any] = {}
    iam = bucket.get("iamConfiguration", {})
    if not iam.get("uniformBucketLevelAccess", {}).get("enabled") or iam.get("publicAccessPrevention") != "enforced":
        patch["iamConfiguration"] = SETTINGS["iamConfiguration"]
    if not bucket.get("versioning", {}).get("enabled"):
        patch["versioning"] = SETTINGS["versioning"]
    current = bucket.get("labels", {})
    missing = {k: v for k, v in labels.items() if current.get(k) != v}
    if missing:
        patch["labels"] = missing  # patch semantics: the bucket's other labels stay
    return patch


def _insert(clients: GcpClients, svc: Any, body: dict[str, Any]) -> dict[str, Any]:
    made: dict[str, Any] = clients.call(
        "storage.buckets.insert", lambda: svc.buckets().insert(project=clients.project, body=body).execute()
    )
    return made


def _patch(clients: GcpClients, svc: Any, bucket: dict[str, Any], patch: dict[str, Any]) -> None:
    """Only if the bucket is still as read (its metageneration), so a concurrent edit is never undone."""
    clients.call(
        "storage.buckets.patch",
        lambda: (
            svc.buckets()
            .patch(bucket=bucket["name"], body=patch, ifMetagenerationMatch=str(bucket["metageneration"]))
            .execute()
        ),
    )


def ensure_bucket(
    clients: GcpClients, svc: Any, name: str, location: str, labels: dict[str, str], owner_label: str
) -> Bucket:
    """Create the bucket, or adopt the project's own; `owner_label` is the label naming the org, which
    an adopted bucket must not have with another value."""
    for _ in range(2):  # a second pass only if someone created the name between our get and insert
        bucket = _get(clients, svc, name)
        if bucket is None:
            body = {"name": name, "location": location, "storageClass": "STANDARD", "labels": labels, **SETTINGS}
            try:
                made = _insert(clients, svc, body)
            except ConflictError:
                continue
            return Bucket(name, str(made.get("location", location)), created=True)
        if not _in_project(clients, svc, name):
            raise UsageError(
                f"gs://{name} belongs to another project (number {bucket.get('projectNumber', '?')}), not "
                f"{clients.project}: nothing was changed; pick another state.bucket"
            )
        other = bucket.get("labels", {}).get(owner_label)
        if other and other != labels[owner_label]:
            raise UsageError(
                f"gs://{name} is labelled {owner_label}={other}, another org's state bucket: nothing was changed; "
                "pick another state.bucket"
            )
        patch = _differences(bucket, labels)
        if patch:
            _patch(clients, svc, bucket, patch)
        return Bucket(name, str(bucket.get("location", "")), created=False, changed=sorted(patch))
    raise UsageError(f"gs://{name}: the bucket name is taken by another project or account; pick another")


def create_object(clients: GcpClients, svc: Any, bucket: str, key: str, data: bytes, content_type: str) -> str:
    """Write `data` at `key` only if no live object is there; returns the new generation. A refusal
    whose object holds exactly `data` was this call's own write (a retried request that had succeeded)."""
    from googleapiclient.http import MediaInMemoryUpload

    def insert() -> dict[str, Any]:
        media = MediaInMemoryUpload(data, mimetype=content_type, resumable=False)
        body = {"name": key, "contentType": content_type}
        request = svc.objects().insert(bucket=bucket, body=body, ifGenerationMatch="0", media_body=media)
        return dict(request.execute())

    try:
        return str(clients.call("storage.objects.insert", insert)["generation"])
    except ConflictError as err:
        if err.code != "conditionNotMet":
            raise
        there = object_metadata(clients, svc, bucket, key)
        if there is None:  # gone again since: nothing of ours is there either
            raise
        md5 = base64.b64encode(hashlib.md5(data).digest()).decode()
        if there.get("md5Hash") == md5:
            return str(there["generation"])
        raise ObjectExistsError(f"gs://{bucket}/{key} already exists", str(there.get("generation", "?"))) from err


def object_metadata(clients: GcpClients, svc: Any, bucket: str, key: str) -> dict[str, Any] | None:
    try:
        got: dict[str, Any] = clients.call(
            "storage.objects.get", lambda: svc.objects().get(bucket=bucket, object=key).execute()
        )
    except NotFoundError:
        return None
    return got
