"""Cloud Storage JSON API v1: buckets (insert/get/patch/list/delete) and object metadata (get/list/delete,
with generation preconditions). Object data, uploads and the XML read path are in storage_media.py.

Bucket names are global: a bucket belongs to the project that created it (`projectNumber`), and a second
insert of the name is a 409 `conflict` whichever project asks, as with Google. Every object name keeps
its generations; with versioning on, an overwrite or a delete leaves the old generation noncurrent
(`timeDeleted`), without it the old generation goes. Not emulated: ACLs (`projection=full` shows none),
IAM on buckets, lifecycle rules acting, retention, pagination (every match comes in one page).
"""

from __future__ import annotations

import base64
import copy
import re
import urllib.parse
from datetime import UTC, datetime, timedelta
from typing import Any

from vmplane.sandbox.gcp.compute import Call, handler, merge
from vmplane.sandbox.gcp.errors import ApiError, condition_not_met, invalid
from vmplane.sandbox.gcp.schema import require_body
from vmplane.sandbox.gcp.store import Resource, now

API = "https://www.googleapis.com/storage/v1/"
_BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]")
_MULTI_REGIONS = {"US", "EU", "ASIA"}
_DUAL_REGIONS = {"NAM4", "EUR4", "ASIA1", "EUR5", "EUR7", "EUR8"}
# Set by the service, never taken from a request body.
_OUTPUT_ONLY = ("kind", "id", "selfLink", "projectNumber", "name", "timeCreated", "updated", "metageneration")
NOT_HELD = "At least one of the pre-conditions you specified did not hold."


def no_bucket() -> ApiError:
    return ApiError(404, "notFound", "The specified bucket does not exist.")


def no_object(bucket: str, name: str) -> ApiError:
    return ApiError(404, "notFound", f"No such object: {bucket}/{name}")


def bucket_of(call: Call, name: str | None = None) -> Resource:
    found = call.state.buckets.get(name or call.params["bucket"])
    if found is None:
        raise no_bucket()
    return found


def _etag(metageneration: str) -> str:
    return base64.b64encode(f"CA{metageneration}=".encode()).decode()


def _location_type(location: str) -> str:
    if location in _MULTI_REGIONS:
        return "multi-region"
    return "dual-region" if location in _DUAL_REGIONS else "region"


def _iam(config: Resource, stamp: str) -> Resource:
    """iamConfiguration with `bucketPolicyOnly` mirroring `uniformBucketLevelAccess` (its old name), as Google
    keeps them; `lockedTime` is when turning uniform access off stops being possible (90 days on)."""
    given = config.get("uniformBucketLevelAccess") or config.get("bucketPolicyOnly") or {}
    uniform = given.get("enabled", False)
    state: Resource = {"enabled": bool(uniform)}
    if uniform:
        locked = datetime.fromisoformat(stamp.replace("Z", "+00:00")) + timedelta(days=90)
        state["lockedTime"] = locked.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return {
        "bucketPolicyOnly": dict(state),
        "uniformBucketLevelAccess": dict(state),
        "publicAccessPrevention": config.get("publicAccessPrevention", "inherited"),
    }


def _check_labels(labels: Any) -> None:
    for key, value in (labels or {}).items():
        if not re.fullmatch(r"[a-z][a-z0-9_-]{0,62}", key) or not re.fullmatch(r"[a-z0-9_-]{0,63}", value or ""):
            raise invalid(f"Invalid argument: label '{key}: {value}' violates the label format.")


@handler("storage.buckets.insert")
def _insert(call: Call) -> Resource:
    body = require_body(call.body, "bucket")
    name = body.get("name", "")
    if not isinstance(name, str) or not _BUCKET_NAME.fullmatch(name) or name.startswith("goog"):
        raise invalid(f"Invalid bucket name: '{name}'")
    project = call.state.project(call.query["project"])
    existing = call.state.buckets.get(name)
    if existing is not None:
        if existing["projectNumber"] == project.number:
            raise ApiError(
                409, "conflict", "Your previous request to create the named bucket succeeded and you already own it."
            )
        raise ApiError(
            409,
            "conflict",
            "The requested bucket name is not available. The bucket namespace is shared by all users of the "
            "system. Please select a different name and try again.",
        )
    _check_labels(body.get("labels"))
    stamp = now()
    location = str(body.get("location") or "US").upper()
    bucket: Resource = {
        **{k: copy.deepcopy(v) for k, v in body.items() if k not in _OUTPUT_ONLY},
        "kind": "storage#bucket",
        "id": name,
        "selfLink": f"{API}b/{name}",
        "projectNumber": project.number,
        "name": name,
        "timeCreated": stamp,
        "updated": stamp,
        "metageneration": "1",
        "generation": str(call.state.new_generation()),
        "location": location,
        "locationType": _location_type(location),
        "storageClass": body.get("storageClass", "STANDARD"),
        "iamConfiguration": _iam(body.get("iamConfiguration") or {}, stamp),
        "rpo": "DEFAULT",
        "softDeletePolicy": {"retentionDurationSeconds": "604800", "effectiveTime": stamp},
        "etag": _etag("1"),
    }
    call.state.buckets[name] = bucket
    call.state.objects[name] = {}
    return bucket


def _metageneration_holds(call: Call, current: str) -> None:
    match, differ = call.query.get("ifMetagenerationMatch"), call.query.get("ifMetagenerationNotMatch")
    if (match is not None and match != current) or (differ is not None and differ == current):
        raise condition_not_met(NOT_HELD)


@handler("storage.buckets.get")
def _get(call: Call) -> Resource:
    bucket = bucket_of(call)
    _metageneration_holds(call, bucket["metageneration"])
    return bucket


@handler("storage.buckets.patch")
def _patch(call: Call) -> Resource:
    """Patch semantics: the fields given are merged in (a null removes one, a label included)."""
    bucket = bucket_of(call)
    _metageneration_holds(call, bucket["metageneration"])
    change = {k: v for k, v in require_body(call.body, "bucket").items() if k not in _OUTPUT_ONLY}
    if change.get("name", bucket["name"]) != bucket["name"]:
        raise invalid("Invalid argument: a bucket's name cannot change.")
    merged = merge(bucket, change)
    _check_labels(merged.get("labels"))
    stamp = now()
    if "iamConfiguration" in change:
        given = change["iamConfiguration"] or {}
        uniform = given.get("uniformBucketLevelAccess", given.get("bucketPolicyOnly"))
        wanted = {**merged["iamConfiguration"], **({"uniformBucketLevelAccess": uniform} if uniform else {})}
        was = bucket["iamConfiguration"]["uniformBucketLevelAccess"]
        merged["iamConfiguration"] = _iam(wanted, stamp)
        if was.get("enabled") and merged["iamConfiguration"]["uniformBucketLevelAccess"]["enabled"]:
            merged["iamConfiguration"]["uniformBucketLevelAccess"] = was  # already on: its lockedTime stays
            merged["iamConfiguration"]["bucketPolicyOnly"] = dict(was)
    metageneration = str(int(bucket["metageneration"]) + 1)
    merged.update(updated=stamp, metageneration=metageneration, etag=_etag(metageneration))
    bucket.clear()
    bucket.update(merged)
    return bucket


@handler("storage.buckets.list")
def _list(call: Call) -> Resource:
    project = call.state.project(call.query["project"])
    prefix = call.query.get("prefix") or ""
    items = [
        b
        for name, b in sorted(call.state.buckets.items())
        if b["projectNumber"] == project.number and name.startswith(prefix)
    ]
    return {"kind": "storage#buckets", "items": items}


@handler("storage.buckets.delete")
def _delete(call: Call) -> Any:
    from vmplane.sandbox.gcp.storage_media import Raw

    bucket = bucket_of(call)
    _metageneration_holds(call, bucket["metageneration"])
    if any(versions for versions in call.state.objects[bucket["name"]].values()):
        raise ApiError(409, "conflict", "The bucket you tried to delete is not empty.")
    del call.state.buckets[bucket["name"]]
    del call.state.objects[bucket["name"]]
    return Raw(204, b"")


# ---- objects ----
def live(call: Call, bucket: str, name: str) -> Resource | None:
    versions = call.state.objects[bucket].get(name) or []
    return versions[-1] if versions and "timeDeleted" not in versions[-1] else None


def generation_holds(call: Call, current: Resource | None) -> None:
    """ifGenerationMatch (0: no live object), ifGenerationNotMatch and the metageneration pair."""
    gen = current["generation"] if current else "0"
    match, differ = call.query.get("ifGenerationMatch"), call.query.get("ifGenerationNotMatch")
    if (match is not None and match != gen) or (differ is not None and differ == gen):
        raise condition_not_met(NOT_HELD)
    if current is None and (
        call.query.get("ifMetagenerationMatch") is not None or call.query.get("ifMetagenerationNotMatch") is not None
    ):
        raise condition_not_met(NOT_HELD)
    if current is not None:
        _metageneration_holds(call, current["metageneration"])


def find(call: Call) -> Resource:
    """The object a get/delete names: a given `generation` (live or noncurrent), else the live one."""
    bucket, name = bucket_of(call)["name"], call.params["object"]
    wanted = call.query.get("generation")
    if wanted is None:
        found = live(call, bucket, name)
    else:
        found = next((v for v in call.state.objects[bucket].get(name, []) if v["generation"] == wanted), None)
    if found is None:
        raise no_object(bucket, name)
    return found


def link(bucket: str, name: str) -> str:
    return f"{API}b/{bucket}/o/{urllib.parse.quote(name, safe='')}"


@handler("storage.objects.get")
def _object_get(call: Call) -> Any:
    found = find(call)
    generation_holds(call, found)
    if call.query.get("alt") == "media":
        from vmplane.sandbox.gcp.storage_media import download

        return download(found)
    return {k: v for k, v in found.items() if not k.startswith("_")}


@handler("storage.objects.list")
def _object_list(call: Call) -> Resource:
    bucket = bucket_of(call)["name"]
    prefix, delimiter = call.query.get("prefix") or "", call.query.get("delimiter") or ""
    start, end = call.query.get("startOffset") or "", call.query.get("endOffset")
    items: list[Resource] = []
    prefixes: set[str] = set()
    for name, versions in sorted(call.state.objects[bucket].items()):
        if not name.startswith(prefix) or name < start or (end is not None and name >= end):
            continue
        rest = name[len(prefix) :]
        if delimiter and delimiter in rest:
            prefixes.add(prefix + rest.split(delimiter, 1)[0] + delimiter)
            continue
        shown = versions if call.query.get("versions") else [v for v in versions[-1:] if "timeDeleted" not in v]
        items.extend({k: v for k, v in o.items() if not k.startswith("_")} for o in shown)
    out: Resource = {"kind": "storage#objects", "items": items}
    if prefixes:
        out["prefixes"] = sorted(prefixes)
    return out


@handler("storage.objects.delete")
def _object_delete(call: Call) -> Any:
    from vmplane.sandbox.gcp.storage_media import Raw

    bucket = bucket_of(call)
    found = find(call)
    generation_holds(call, found)
    versions = call.state.objects[bucket["name"]][found["name"]]
    if found is versions[-1] and "timeDeleted" not in found and bucket.get("versioning", {}).get("enabled"):
        found["timeDeleted"] = now()  # the live generation becomes noncurrent; it can still be read by number
    else:
        versions.remove(found)
        if not versions:
            del call.state.objects[bucket["name"]][found["name"]]
    return Raw(204, b"")
