"""The sandbox's Cloud Storage JSON API through googleapiclient's storage v1 client (the one `tf state init`
builds): buckets, uploads with generation preconditions, downloads, versions, and the XML read that Go's
client (Terraform's gcs backend) uses. Bucket names are global, so every test makes its own."""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest
from googleapiclient.errors import HttpError
from googleapiclient.http import MediaIoBaseUpload
from tests.sandbox.conftest import Gcp

from vmplane.clouds.gcp.session import GcpClients, GcpTarget
from vmplane.clouds.gcp.state_bucket import storage


@pytest.fixture
def gcs(gcp: Gcp) -> Any:
    return storage(GcpClients(GcpTarget(gcp.project, "us-central1", gcp.sandbox.gcp_endpoint)))


def _name() -> str:
    return f"b-{uuid.uuid4().hex[:16]}"


def _error(info: pytest.ExceptionInfo[HttpError]) -> tuple[int, str, str]:
    err = json.loads(info.value.content)["error"]
    return err["code"], err["errors"][0]["reason"], err["message"]


def _put(gcs: Any, bucket: str, name: str, data: bytes, **query: Any) -> dict[str, Any]:
    media = MediaIoBaseUpload(io.BytesIO(data), mimetype="application/json")
    return dict(gcs.objects().insert(bucket=bucket, name=name, media_body=media, **query).execute())


def test_buckets_insert_get_patch_list(gcp: Gcp, gcs: Any) -> None:
    name = _name()
    body = {"name": name, "location": "us-central1", "labels": {"team": "platform", "old": "x"}}
    made = gcs.buckets().insert(project=gcp.project, body=body).execute()
    assert (made["location"], made["locationType"], made["metageneration"]) == ("US-CENTRAL1", "region", "1")
    assert made["iamConfiguration"]["uniformBucketLevelAccess"] == {"enabled": False}
    assert gcs.buckets().get(bucket=name).execute() == made

    patched = (
        gcs.buckets()
        .patch(
            bucket=name,
            ifMetagenerationMatch="1",
            body={
                "iamConfiguration": {"uniformBucketLevelAccess": {"enabled": True}},
                "versioning": {"enabled": True},
                "labels": {"old": None, "role": "tfstate"},
            },
        )
        .execute()
    )
    assert patched["labels"] == {"team": "platform", "role": "tfstate"}  # patch semantics: null removes one
    assert patched["iamConfiguration"]["uniformBucketLevelAccess"]["enabled"] is True
    assert patched["iamConfiguration"]["bucketPolicyOnly"] == patched["iamConfiguration"]["uniformBucketLevelAccess"]
    assert (patched["versioning"], patched["metageneration"]) == ({"enabled": True}, "2")
    with pytest.raises(HttpError) as stale:
        gcs.buckets().patch(bucket=name, ifMetagenerationMatch="1", body={"labels": {"a": "b"}}).execute()
    assert _error(stale)[:2] == (412, "conditionNotMet")

    listed = gcs.buckets().list(project=gcp.project, prefix=name).execute()["items"]
    assert [b["name"] for b in listed] == [name]
    assert gcs.buckets().list(project=f"{gcp.project}-x", prefix=name).execute()["items"] == []


def test_bucket_errors_are_googles(gcp: Gcp, gcs: Any) -> None:
    name = _name()
    gcs.buckets().insert(project=gcp.project, body={"name": name}).execute()
    with pytest.raises(HttpError) as mine:
        gcs.buckets().insert(project=gcp.project, body={"name": name}).execute()
    assert _error(mine) == (
        409,
        "conflict",
        "Your previous request to create the named bucket succeeded and you already own it.",
    )
    with pytest.raises(HttpError) as theirs:
        gcs.buckets().insert(project=f"{gcp.project}-x", body={"name": name}).execute()
    code, reason, message = _error(theirs)
    assert (code, reason) == (409, "conflict") and "not available" in message
    with pytest.raises(HttpError) as missing:
        gcs.buckets().get(bucket=_name()).execute()
    assert _error(missing) == (404, "notFound", "The specified bucket does not exist.")
    with pytest.raises(HttpError) as bad:
        gcs.buckets().insert(project=gcp.project, body={"name": "UPPER"}).execute()
    assert _error(bad)[:2] == (400, "invalid")
    with pytest.raises(HttpError) as unknown:  # the discovery document's fields only
        gcs.buckets().insert(project=gcp.project, body={"name": _name(), "colour": "red"}).execute()
    assert _error(unknown)[0] == 400 and "colour" in _error(unknown)[2]


def test_uploads_with_generation_preconditions(gcp: Gcp, gcs: Any) -> None:
    bucket = _name()
    gcs.buckets().insert(project=gcp.project, body={"name": bucket}).execute()
    key = "vmplane/acme/demo/default.tfstate"
    first = _put(gcs, bucket, key, b'{"serial": 0}', ifGenerationMatch="0")
    assert (first["name"], first["size"], first["contentType"]) == (key, "13", "application/json")
    with pytest.raises(HttpError) as taken:
        _put(gcs, bucket, key, b'{"serial": 9}', ifGenerationMatch="0")
    assert _error(taken) == (412, "conditionNotMet", "At least one of the pre-conditions you specified did not hold.")
    with pytest.raises(HttpError) as stale:
        _put(gcs, bucket, key, b'{"serial": 9}', ifGenerationMatch=str(int(first["generation"]) - 1))
    assert _error(stale)[:2] == (412, "conditionNotMet")
    assert gcs.objects().get(bucket=bucket, object=key).execute()["generation"] == first["generation"]
    assert gcs.objects().get_media(bucket=bucket, object=key).execute() == b'{"serial": 0}'

    second = _put(gcs, bucket, key, b'{"serial": 1}', ifGenerationMatch=first["generation"])
    assert int(second["generation"]) > int(first["generation"])
    assert gcs.objects().get_media(bucket=bucket, object=key).execute() == b'{"serial": 1}'
    # Without versioning the overwritten generation is gone.
    with pytest.raises(HttpError) as gone:
        gcs.objects().get(bucket=bucket, object=key, generation=first["generation"]).execute()
    assert _error(gone) == (404, "notFound", f"No such object: {bucket}/{key}")


def test_multipart_upload_keeps_metadata_and_checksums(gcp: Gcp, gcs: Any) -> None:
    bucket = _name()
    gcs.buckets().insert(project=gcp.project, body={"name": bucket}).execute()
    media = MediaIoBaseUpload(io.BytesIO(b"123456789"), mimetype="text/plain")
    body = {"name": "check", "metadata": {"owner": "vmplane"}}
    made = gcs.objects().insert(bucket=bucket, body=body, media_body=media).execute()
    assert made["metadata"] == {"owner": "vmplane"} and made["contentType"] == "text/plain"
    # Known vectors: CRC-32C("123456789") is 0xE3069283; MD5 is 25f9e794323b453885f5181f1b624d0b.
    assert made["crc32c"] == "4waSgw=="
    assert made["md5Hash"] == "JfnnlDI7RTiF9RgfG2JNCw=="


def test_versioning_keeps_noncurrent_generations_and_delete_checks_preconditions(gcp: Gcp, gcs: Any) -> None:
    bucket = _name()
    gcs.buckets().insert(project=gcp.project, body={"name": bucket, "versioning": {"enabled": True}}).execute()
    one = _put(gcs, bucket, "p/default.tfstate", b"1")
    two = _put(gcs, bucket, "p/default.tfstate", b"2")
    old = gcs.objects().get_media(bucket=bucket, object="p/default.tfstate", generation=one["generation"]).execute()
    assert old == b"1"
    listed = gcs.objects().list(bucket=bucket, versions=True).execute()["items"]
    assert [(o["generation"], "timeDeleted" in o) for o in listed] == [
        (one["generation"], True),
        (two["generation"], False),
    ]
    assert [o["generation"] for o in gcs.objects().list(bucket=bucket).execute()["items"]] == [two["generation"]]

    with pytest.raises(HttpError) as stale:
        gcs.objects().delete(bucket=bucket, object="p/default.tfstate", ifGenerationMatch=one["generation"]).execute()
    assert _error(stale)[:2] == (412, "conditionNotMet")
    gcs.objects().delete(bucket=bucket, object="p/default.tfstate", ifGenerationMatch=two["generation"]).execute()
    with pytest.raises(HttpError) as gone:
        gcs.objects().get(bucket=bucket, object="p/default.tfstate").execute()
    assert _error(gone)[:2] == (404, "notFound")
    assert len(gcs.objects().list(bucket=bucket, versions=True).execute()["items"]) == 2  # both kept, noncurrent


def test_list_prefixes_and_the_xml_read(gcp: Gcp, gcs: Any) -> None:
    bucket = _name()
    gcs.buckets().insert(project=gcp.project, body={"name": bucket}).execute()
    for key in ("env/a/default.tfstate", "env/b/default.tfstate", "env/top"):
        _put(gcs, bucket, key, key.encode())
    listed = gcs.objects().list(bucket=bucket, prefix="env/", delimiter="/").execute()
    assert [o["name"] for o in listed["items"]] == ["env/top"] and listed["prefixes"] == ["env/a/", "env/b/"]
    shown = gcp.sandbox.gcp_control(f"state?project={gcp.project}", method="GET")["buckets"]
    assert sorted(shown[bucket]["objects"]) == ["env/a/default.tfstate", "env/b/default.tfstate", "env/top"]

    made = gcs.objects().get(bucket=bucket, object="env/a/default.tfstate").execute()
    with urllib.request.urlopen(f"{gcp.sandbox.gcp_endpoint}/{bucket}/env/a/default.tfstate", timeout=10) as r:
        assert r.read() == b"env/a/default.tfstate"
        assert r.headers["X-Goog-Generation"] == made["generation"]
        assert f"md5={made['md5Hash']}" in r.headers["X-Goog-Hash"]
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"{gcp.sandbox.gcp_endpoint}/{bucket}/env/none", timeout=10)
    assert missing.value.code == 404 and b"<Code>NoSuchKey</Code>" in missing.value.read()


def _raw(url: str, data: bytes, content_type: str) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(url, data=data, method="POST", headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_uploads_the_sandbox_refuses(gcp: Gcp, gcs: Any) -> None:
    bucket = _name()
    gcs.buckets().insert(project=gcp.project, body={"name": bucket}).execute()
    base = gcp.sandbox.gcp_endpoint
    # The JSON path takes no media, as Google's.
    status, answer = _raw(f"{base}/storage/v1/b/{bucket}/o?name=x", b"{}", "application/json")
    assert status == 400 and "/upload/" in answer["error"]["message"]
    status, answer = _raw(f"{base}/upload/storage/v1/b/{bucket}/o?name=x", b"data", "text/plain")
    assert status == 400 and "uploadType" in answer["error"]["message"]
    status, answer = _raw(f"{base}/upload/storage/v1/b/{bucket}/o?uploadType=resumable&name=x", b"", "text/plain")
    assert status == 501 and "resumable" in answer["error"]["message"]
    status, answer = _raw(f"{base}/upload/storage/v1/b/{bucket}/o?uploadType=media&name=x&colour=red", b"d", "t/p")
    assert status == 400 and "colour" in answer["error"]["message"]
    status, answer = _raw(f"{base}/upload/storage/v1/b/{bucket}/o?uploadType=media&name=x", b"data", "text/plain")
    assert status == 200 and answer["size"] == "4"


def test_create_object_writes_once_and_knows_its_own_retried_write(gcp: Gcp) -> None:
    """A retried insert whose first attempt had succeeded meets 412: the object holding exactly the data
    sent is that write (same generation back); anything else is someone else's and is refused."""
    from vmplane.clouds.gcp.state_bucket import ObjectExistsError, create_object

    clients = GcpClients(GcpTarget(gcp.project, "us-central1", gcp.sandbox.gcp_endpoint))
    gcs = storage(clients)
    bucket = _name()
    gcs.buckets().insert(project=gcp.project, body={"name": bucket}).execute()
    first = create_object(clients, gcs, bucket, "k/default.tfstate", b'{"lineage": "a"}', "application/json")
    assert create_object(clients, gcs, bucket, "k/default.tfstate", b'{"lineage": "a"}', "application/json") == first
    with pytest.raises(ObjectExistsError) as taken:
        create_object(clients, gcs, bucket, "k/default.tfstate", b'{"lineage": "b"}', "application/json")
    assert taken.value.generation == first
    assert gcs.objects().get_media(bucket=bucket, object="k/default.tfstate").execute() == b'{"lineage": "a"}'
