"""Secret Manager v1 secret versions: addVersion, get, list, access, enable, disable, destroy.

Version N of a secret is `projects/NUMBER/secrets/S/versions/N`, counting from 1. `latest` is the most
recently created version whatever its state, as Google documents it (AccessSecretVersionRequest.name:
"an alias to the most recently created SecretVersion"): when that one is disabled or destroyed, access
of `latest` fails with FAILED_PRECONDITION naming it, as Google answers; a secret without versions
answers 404 "not found or has no versions". A version alias of the secret (`versionAliases`) names a
version as its number does. The payload is kept only in the server's memory (`_data`), answered only by
`access`, dropped at destroy, and never logged; each access is recorded with its caller.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from vmplane.sandbox.gcp.compute import Call, handler
from vmplane.sandbox.gcp.errors import ApiError, invalid
from vmplane.sandbox.gcp.secretmanager import (
    caller,
    check_etag,
    granted,
    listed,
    new_etag,
    secret_of,
    unemulated,
)
from vmplane.sandbox.gcp.storage_media import crc32c
from vmplane.sandbox.gcp.store import Project, Resource, now, public

MAX_PAYLOAD = 64 * 1024  # "Must be no larger than 64KiB" (SecretPayload.data)
STATES = ("ENABLED", "DISABLED", "DESTROYED")


def _failed(message: str) -> ApiError:
    return ApiError(400, "failedPrecondition", message, "FAILED_PRECONDITION")


def resolve(call: Call, name: str) -> tuple[Project, Resource, Resource]:
    """`projects/P/secrets/S/versions/V` (V a number, `latest` or an alias): project, secret, version."""
    project, secret = secret_of(call.state, name)
    wanted = name.split("/")[5]
    versions: list[Resource] = secret["_versions"]
    if wanted == "latest":
        if not versions:
            raise ApiError(404, "notFound", f"Secret [{secret['name']}] not found or has no versions.", "NOT_FOUND")
        return project, secret, versions[-1]
    number = secret.get("versionAliases", {}).get(wanted, wanted)
    if str(number).isdigit() and 1 <= int(number) <= len(versions):
        return project, secret, versions[int(number) - 1]
    raise ApiError(404, "notFound", f"Secret Version [{secret['name']}/versions/{wanted}] not found.", "NOT_FOUND")


def _decode(data: Any) -> bytes:
    """proto3 JSON bytes: standard or URL-safe base64, padding optional."""
    text = str(data or "").replace("-", "+").replace("_", "/").rstrip("=")
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise invalid("Invalid value at 'payload.data' (TYPE_BYTES), Base64 decoding failed.") from None


def _replication_status(secret: Resource) -> Resource:
    if "userManaged" in secret["replication"]:
        replicas = secret["replication"]["userManaged"]["replicas"]
        return {"userManaged": {"replicas": [{"location": r["location"]} for r in replicas]}}
    return {"automatic": {}}


@handler("secretmanager.projects.secrets.addVersion")
def _add(call: Call) -> Resource:
    _, secret = secret_of(call.state, call.params["parent"])
    payload = (call.body or {}).get("payload") if isinstance(call.body, dict) else None
    if not isinstance(payload, dict):
        raise invalid("SecretPayload is required: the request has no payload.")
    data = _decode(payload.get("data"))
    if len(data) > MAX_PAYLOAD:
        raise invalid(f"Secret Payload cannot be larger than 64KiB (it is {len(data)} bytes).")
    checksum = crc32c(data)
    given = payload.get("dataCrc32c")
    if given is not None and int(given) != checksum:
        raise invalid("The checksum in field SecretPayload.data_crc32c did not match the data in SecretPayload.data.")
    version: Resource = {
        "name": f"{secret['name']}/versions/{len(secret['_versions']) + 1}",
        "createTime": now(),
        "state": "ENABLED",
        "replicationStatus": _replication_status(secret),
        "etag": new_etag(call.state),
        "clientSpecifiedPayloadChecksum": given is not None,
        "_data": data,
        "_crc32c": checksum,
    }
    secret["_versions"].append(version)
    return public(version)


@handler("secretmanager.projects.secrets.versions.get")
def _get(call: Call) -> Resource:
    return public(resolve(call, call.params["name"])[2])


@handler("secretmanager.projects.secrets.versions.list")
def _list(call: Call) -> Resource:
    _, secret = secret_of(call.state, call.params["parent"])
    wanted = _state_filter(str(call.query.get("filter") or ""))
    found = [public(v) for v in reversed(secret["_versions"]) if v["state"] in wanted]  # newest first, as Google
    return listed(call, "versions", found)


def _state_filter(text: str) -> tuple[str, ...]:
    """`state:ENABLED` / `state=DISABLED` (optionally OR'ed): the filter clients use on versions."""
    if not text.strip():
        return STATES
    wanted = []
    for term in text.replace(" OR ", " ").split():
        key, sep, value = term.replace("=", ":").partition(":")
        if key != "state" or not sep or value.upper() not in STATES:
            raise unemulated(f"the versions list filter '{text}'")
        wanted.append(value.upper())
    return tuple(wanted)


@handler("secretmanager.projects.secrets.versions.access")
def _access(call: Call) -> Resource:
    project, secret, version = resolve(call, call.params["name"])
    who = caller(call)
    record = {"secret": secret["name"], "version": version["name"], "caller": who, "time": now()}
    if not granted(project, secret, who, "secretmanager.versions.access"):
        project.secret_accesses.append({**record, "outcome": "PERMISSION_DENIED"})
        raise ApiError(
            403,
            "forbidden",
            f"Permission 'secretmanager.versions.access' denied for resource '{version['name']}' "
            "(or it may not exist).",
            "PERMISSION_DENIED",
        )
    if version["state"] != "ENABLED":
        project.secret_accesses.append({**record, "outcome": "FAILED_PRECONDITION"})
        raise _failed(f"Secret Version [{version['name']}] is in {version['state']} state.")
    project.secret_accesses.append({**record, "outcome": "OK"})
    return {
        "name": version["name"],
        "payload": {"data": base64.b64encode(version["_data"]).decode(), "dataCrc32c": str(version["_crc32c"])},
    }


def _transition(call: Call, target: str) -> Resource:
    _, _, version = resolve(call, call.params["name"])
    body = call.body if isinstance(call.body, dict) else {}
    check_etag(body.get("etag"), version["etag"])
    if version["state"] == "DESTROYED":  # terminal: Google refuses every further change
        raise _failed("SecretVersion.state is already DESTROYED.")
    if version["state"] != target:
        version["state"] = target
        version["etag"] = new_etag(call.state)
        if target == "DESTROYED":
            version["destroyTime"] = now()
            version.pop("_data", None)  # gone for good, as Google's destroy
            version.pop("_crc32c", None)
    return public(version)


@handler("secretmanager.projects.secrets.versions.enable")
def _enable(call: Call) -> Resource:
    return _transition(call, "ENABLED")


@handler("secretmanager.projects.secrets.versions.disable")
def _disable(call: Call) -> Resource:
    return _transition(call, "DISABLED")


@handler("secretmanager.projects.secrets.versions.destroy")
def _destroy(call: Call) -> Resource:
    return _transition(call, "DESTROYED")
