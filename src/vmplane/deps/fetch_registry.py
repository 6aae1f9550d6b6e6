"""The NGINX image's platform manifest digest, from a Docker Registry HTTP API v2.

The registry answers the first request with 401 and a `WWW-Authenticate: Bearer realm=…,service=…,
scope=…` challenge; an anonymous token from that realm is used for the pull scope only (it is never
logged). The tag's index (OCI image index or Docker manifest list) gives the platform's manifest
digest; that manifest is then fetched by digest and its sha256, computed over the bytes received, must
equal both the index's digest and the `Docker-Content-Digest` header: that computed digest is pinned.
"""

from __future__ import annotations

import hashlib
import json
import re
import urllib.parse
from typing import Any

from vmplane.deps import http
from vmplane.deps.manifest import Image
from vmplane.deps.sources import NGINX_REPOSITORY, NGINX_TAG, OCI_PLATFORM, mirrors
from vmplane.envspec.models import Arch

INDEX_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
_CHALLENGE_PARAM = re.compile(r'(\w+)="([^"]*)"')


def read_image(arch: Arch, repository: str = NGINX_REPOSITORY, tag: str = NGINX_TAG) -> Image:
    """The image for `arch`, pinned by the digest of its platform manifest; raises FetchError."""
    registry = mirrors()["registry"]
    index_url = f"{registry}/v2/{repository}/manifests/{tag}"
    token = _token(index_url)
    index = _get_manifest(index_url, token, INDEX_TYPES + MANIFEST_TYPES)
    doc = _json(index.body, index_url)
    if doc.get("mediaType") in MANIFEST_TYPES or "manifests" not in doc:
        raise http.FetchError(f"{index_url}: a single-platform manifest, not an index: cannot choose {arch.value}")
    digest = platform_digest(doc, arch, index_url)
    manifest_url = f"{registry}/v2/{repository}/manifests/{digest}"
    got = _get_manifest(manifest_url, token, MANIFEST_TYPES)
    computed = "sha256:" + hashlib.sha256(got.body).hexdigest()
    header = got.headers.get("Docker-Content-Digest")
    if computed != digest or (header is not None and header != computed):
        raise http.FetchError(
            f"{manifest_url}: the bytes received hash to {computed}, not {digest}"
            + (f" (Docker-Content-Digest {header})" if header else "")
            + ": refused"
        )
    # A mirror of Docker Hub serves the same bytes, so the reference stays docker.io's.
    return Image(repository=f"docker.io/{repository}", tag=tag, digest=computed)


def platform_digest(index: dict[str, Any], arch: Arch, where: str) -> str:
    """The digest of the linux/<arch> (arm64: variant v8 or none) manifest an index lists."""
    want_arch, want_variant = OCI_PLATFORM[arch]
    for entry in index.get("manifests", []):
        platform = entry.get("platform") or {}
        variant = platform.get("variant")
        if (
            platform.get("os") == "linux"
            and platform.get("architecture") == want_arch
            and (variant is None or variant == want_variant)
            and isinstance(entry.get("digest"), str)
        ):
            return str(entry["digest"])
    raise http.FetchError(f"{where}: no linux/{want_arch}{'/' + want_variant if want_variant else ''} manifest listed")


def _token(url: str) -> str | None:
    """An anonymous pull token from the challenge's realm, or None when the registry asks for none."""
    probe = http.get(url, {"Accept": ", ".join(INDEX_TYPES)}, ok=frozenset({401}))
    if probe.status != 401:
        return None
    challenge = probe.headers.get("WWW-Authenticate", "")
    if not challenge.lower().startswith("bearer "):
        raise http.FetchError(f"{url}: 401 without a Bearer challenge: anonymous pull is not offered")
    params = dict(_CHALLENGE_PARAM.findall(challenge))
    realm = params.pop("realm", "")
    if not realm.startswith(("https://", "http://")):
        raise http.FetchError(f"{url}: the Bearer challenge names no realm")
    query = urllib.parse.urlencode({k: v for k, v in params.items() if k in ("service", "scope")})
    answer = http.get(f"{realm}?{query}" if query else realm)
    doc = _json(answer.body, realm)
    token = doc.get("token") or doc.get("access_token")
    if not isinstance(token, str) or not token:
        raise http.FetchError(f"{realm}: the token endpoint gave no token")
    return token


def _get_manifest(url: str, token: str | None, accept: tuple[str, ...]) -> http.Response:
    headers = {"Accept": ", ".join(accept)}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return http.get(url, headers)


def _json(body: bytes, where: str) -> dict[str, Any]:
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as err:
        raise http.FetchError(f"{where}: not JSON: {err}") from None
    if not isinstance(doc, dict):
        raise http.FetchError(f"{where}: not a JSON object")
    return doc
