"""Cloud Storage object data: uploads at `/upload/storage/v1/b/{bucket}/o` (uploadType `media` and
`multipart`, with generation preconditions: `ifGenerationMatch=0` creates only if no live object
exists), downloads (`alt=media`), and the XML API's plain read (`GET /{bucket}/{object}`), which Go's
storage client (so Terraform's gcs backend) uses to read an object. Resumable uploads are not emulated:
they answer 501, so a client that needs them fails loudly rather than storing something else.
"""

from __future__ import annotations

import base64
import email.parser
import email.policy
import hashlib
import json
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from vmplane.sandbox.gcp.compute import Call, handler
from vmplane.sandbox.gcp.errors import ApiError, bad_request
from vmplane.sandbox.gcp.storage import API, bucket_of, generation_holds, link, live
from vmplane.sandbox.gcp.store import Resource, State, now

# What a client may set on an object; the rest is the service's.
_SETTABLE = (
    "cacheControl",
    "contentDisposition",
    "contentEncoding",
    "contentLanguage",
    "contentType",
    "customTime",
    "metadata",
    "temporaryHold",
    "eventBasedHold",
)


@dataclass(frozen=True)
class Raw:
    """An answer that is not JSON: object data, an XML error, or an empty 204."""

    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), what Cloud Storage reports; the sandbox holds small objects only."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = (crc >> 8) ^ _CRC_TABLE[(crc ^ byte) & 0xFF]
    return crc ^ 0xFFFFFFFF


def split_upload(upload_type: str | None, content_type: str, raw: bytes) -> tuple[dict[str, Any], bytes, str]:
    """(metadata, data, data's content type) of an upload request body."""
    if upload_type == "media":
        return {}, raw, content_type or "application/octet-stream"
    if upload_type == "multipart":
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + raw
        )
        parts = list(message.iter_parts()) if message.is_multipart() else []
        if len(parts) != 2:
            raise bad_request("Multipart upload bodies must have exactly two parts: the metadata, then the media.")
        head, media = (p.get_payload(decode=True) for p in parts)
        try:
            metadata = json.loads(head if isinstance(head, bytes) and head.strip() else b"{}")
        except ValueError as e:
            raise ApiError(400, "parseError", f"Invalid JSON payload received. {e}") from None
        if not isinstance(metadata, dict):
            raise ApiError(400, "parseError", "Invalid JSON payload received. The metadata must be an object.")
        return metadata, media if isinstance(media, bytes) else b"", parts[1].get_content_type()
    if upload_type == "resumable":
        raise ApiError(501, "notImplemented", "the sandbox does not emulate resumable uploads", "UNIMPLEMENTED")
    raise bad_request("Upload requests must include an uploadType URL parameter and a URL path beginning with /upload/")


def write(call: Call, bucket: Resource, name: str, data: bytes, metadata: dict[str, Any]) -> Resource:
    """A new generation of `name`, if the request's preconditions hold for the live one."""
    current = live(call, bucket["name"], name)
    generation_holds(call, current)
    stamp = now()
    generation = str(call.state.new_generation())
    obj: Resource = {
        **{k: v for k, v in metadata.items() if k in _SETTABLE},
        "kind": "storage#object",
        "id": f"{bucket['name']}/{name}/{generation}",
        "selfLink": link(bucket["name"], name),
        "mediaLink": f"{link(bucket['name'], name)}?generation={generation}&alt=media".replace(
            API, "https://storage.googleapis.com/download/storage/v1/"
        ),
        "name": name,
        "bucket": bucket["name"],
        "generation": generation,
        "metageneration": "1",
        "storageClass": bucket.get("storageClass", "STANDARD"),
        "size": str(len(data)),
        "md5Hash": base64.b64encode(hashlib.md5(data).digest()).decode(),
        "crc32c": base64.b64encode(crc32c(data).to_bytes(4, "big")).decode(),
        "etag": base64.b64encode(f"C{generation}".encode()).decode(),
        "timeCreated": stamp,
        "updated": stamp,
        "timeStorageClassUpdated": stamp,
        "timeFinalized": stamp,
        "_data": data,
    }
    obj.setdefault("contentType", "application/octet-stream")
    versions = call.state.objects[bucket["name"]].setdefault(name, [])
    if current is not None:
        if bucket.get("versioning", {}).get("enabled"):
            current["timeDeleted"] = stamp  # kept, noncurrent
        else:
            versions.remove(current)
    versions.append(obj)
    return obj


@handler("storage.objects.insert")
def _insert(call: Call) -> Resource:
    if not call.method.upload:
        raise bad_request(
            "Upload requests must include an uploadType URL parameter and a URL path beginning with /upload/"
        )
    bucket = bucket_of(call)
    metadata = dict(call.body or {})
    name = metadata.get("name") or call.query.get("name")
    if not name:
        raise ApiError(400, "required", "Required")
    if call.content_type and "contentType" not in metadata:
        metadata["contentType"] = call.content_type
    obj = write(call, bucket, str(name), call.media or b"", metadata)
    return {k: v for k, v in obj.items() if not k.startswith("_")}


def _headers(obj: Resource) -> dict[str, str]:
    md5_hex = base64.b64decode(obj["md5Hash"]).hex()
    return {
        "Content-Type": obj.get("contentType", "application/octet-stream"),
        "ETag": f'"{md5_hex}"',
        "Last-Modified": _http_date(obj["updated"]),
        "X-Goog-Generation": obj["generation"],
        "X-Goog-Metageneration": obj["metageneration"],
        "X-Goog-Hash": f"crc32c={obj['crc32c']},md5={obj['md5Hash']}",
        "X-Goog-Stored-Content-Length": obj["size"],
        "X-Goog-Stored-Content-Encoding": obj.get("contentEncoding", "identity"),
        "X-Goog-Storage-Class": obj["storageClass"],
    }


def _http_date(stamp: str) -> str:
    from datetime import datetime
    from email.utils import format_datetime

    return format_datetime(datetime.fromisoformat(stamp.replace("Z", "+00:00")), usegmt=True)


def download(obj: Resource) -> Raw:
    return Raw(200, bytes(obj["_data"]), _headers(obj))


def _xml_error(status: int, code: str, message: str) -> Raw:
    body = f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code><Message>{message}</Message></Error>"
    return Raw(status, body.encode(), {"Content-Type": "application/xml; charset=UTF-8"})


def xml_bucket(state: State, path: str) -> str | None:
    """The bucket an XML API path (`/{bucket}/{object}`) names, if it is one the sandbox holds."""
    first = urllib.parse.unquote(path.lstrip("/").split("/", 1)[0])
    return first if first in state.buckets and path.count("/") >= 2 else None


def xml_read(state: State, path: str, headers: dict[str, str]) -> Raw:
    """GET /{bucket}/{object} of the XML API: the live object's data, with Google's x-goog-* headers."""
    bucket, _, quoted = path.lstrip("/").partition("/")
    name = urllib.parse.unquote(quoted)
    if "range" in headers:
        return _xml_error(501, "NotImplemented", "the sandbox does not emulate ranged reads")
    versions = state.objects.get(urllib.parse.unquote(bucket), {}).get(name) or []
    if not versions or "timeDeleted" in versions[-1]:
        return _xml_error(404, "NoSuchKey", "The specified key does not exist.")
    return download(versions[-1])
