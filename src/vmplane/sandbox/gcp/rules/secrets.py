"""Rules on Secret Manager v1 (secretmanager.py, secretmanager_versions.py enforce them while doing the work):
secret ids, replication, payload size and checksum, version states, `latest`, etags, roles on a secret.

Before Secret Manager was served, every one of these requests was a 404 (no route in the sandbox)."""

from __future__ import annotations

import base64
from typing import Any

from vmplane.sandbox.gcp.rules import Step, rule

S = "/v1/projects/{p}/secrets"
_REST = "https://cloud.google.com/secret-manager/docs/reference/rest/v1/"
_SECRETS = "sandbox/gcp/secretmanager.py"
_VERSIONS = "sandbox/gcp/secretmanager_versions.py"
_M = "secretmanager.projects.secrets."
_OLD = "404: the sandbox served no Secret Manager"
_FAILED = "400 failedPrecondition"
# Google answers `latest` with the newest version whatever its state, and 400 when that one is disabled
_LATEST = "https://github.com/google-github-actions/get-secretmanager-secrets/issues/268"


def create(secret_id: str = "s1", body: Any = None) -> Step:
    return Step("POST", f"{S}?secretId={secret_id}", {"replication": {"automatic": {}}} if body is None else body)


def add(data: bytes = b"v", **payload: Any) -> Step:
    return Step("POST", f"{S}/s1:addVersion", {"payload": {"data": base64.b64encode(data).decode(), **payload}})


def version(n: str, verb: str = "") -> Step:
    http = "POST" if verb and verb != "access" else "GET"
    return Step(http, f"{S}/s1/versions/{n}" + (f":{verb}" if verb else ""), {} if http == "POST" else None)


for _id, _methods, _summary, _source, _answer, _example, _where in (
    (
        "secretmanager.secret-id",
        (_M + "create",),
        "a secret id outside `[a-zA-Z_0-9-]{1,255}`",
        _REST + "projects.secrets/create",
        "400 invalid",
        (create("db.password"),),
        _SECRETS,
    ),
    (
        "secretmanager.replication-required",
        (_M + "create",),
        "a global secret created without a replication policy (automatic or userManaged, exactly one)",
        _REST + "projects.secrets#Replication",
        "400 invalid",
        (create(body={}),),
        _SECRETS,
    ),
    (
        "secretmanager.payload-64k",
        (_M + "addVersion",),
        "a version whose payload is larger than 64 KiB",
        _REST + "SecretPayload",
        "400 invalid",
        (create(), add(b"x" * (64 * 1024 + 1))),
        _VERSIONS,
    ),
    (
        "secretmanager.payload-crc32c",
        (_M + "addVersion",),
        "a version whose `dataCrc32c` is not the CRC32C of its data",
        "https://cloud.google.com/secret-manager/docs/data-integrity",
        "400 invalid",
        (create(), add(b"v", dataCrc32c="1")),
        _VERSIONS,
    ),
    (
        "secretmanager.access-disabled",
        (_M + "versions.access",),
        "access of a DISABLED version",
        "https://cloud.google.com/secret-manager/docs/disable-secret-version",
        _FAILED,
        (create(), add(), version("1", "disable"), version("1", "access")),
        _VERSIONS,
    ),
    (
        "secretmanager.access-destroyed",
        (_M + "versions.access",),
        "access of a DESTROYED version",
        _LATEST,
        _FAILED,
        (create(), add(), version("1", "destroy"), version("1", "access")),
        _VERSIONS,
    ),
    (
        "secretmanager.latest-is-newest",
        (_M + "versions.access",),
        "`latest` is the newest version whatever its state: access fails when it is disabled, "
        "even with an older version enabled",
        _LATEST,
        _FAILED,
        (create(), add(), add(), version("2", "disable"), version("latest", "access")),
        _VERSIONS,
    ),
    (
        "secretmanager.destroyed-final",
        (
            _M + "versions.enable",
            _M + "versions.disable",
            _M + "versions.destroy",
        ),
        "enabling, disabling or destroying a DESTROYED version",
        "https://github.com/hashicorp/terraform-provider-google/issues/12504",
        _FAILED,
        (create(), add(), version("1", "destroy"), version("1", "enable")),
        _VERSIONS,
    ),
    (
        "secretmanager.no-versions",
        (
            _M + "versions.access",
            _M + "versions.get",
        ),
        "`latest` of a secret without versions: not found",
        _REST + "projects.secrets.versions/access",
        "404 notFound",
        (create(), version("latest", "access")),
        _VERSIONS,
    ),
    (
        "secretmanager.stale-etag",
        (_M + "delete", _M + "patch", _M + "versions.enable", _M + "versions.disable", _M + "versions.destroy"),
        "an etag that is not the current one (the secret's, or the version's)",
        "https://github.com/aip-dev/google.aip.dev/pull/705",
        "409 aborted",
        (create(), Step("DELETE", f"{S}/s1?etag=%22stale%22")),
        _SECRETS,
    ),
    (
        "secretmanager.secret-role",
        (_M + "setIamPolicy",),
        "a binding on a secret for a role that is not Secret Manager's (basic or another service's)",
        "https://cloud.google.com/secret-manager/docs/access-control",
        "400 invalid",
        (
            create(),
            Step(
                "POST",
                f"{S}/s1:setIamPolicy",
                {"policy": {"bindings": [{"role": "roles/compute.admin", "members": ["user:a@example.com"]}]}},
            ),
        ),
        _SECRETS,
    ),
):
    rule(_id, _methods, _summary, _source, _answer, _OLD, _example, where=_where)
