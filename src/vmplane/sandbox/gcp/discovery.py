"""Google's own discovery documents, shipped inside google-api-python-client, as the sandbox's contract.

Every request is routed by HTTP method and the method's `flatPath` (under the document's servicePath),
its path parameters are checked against their `pattern`, and unknown query parameters are refused.
IAM, Resource Manager and Secret Manager all live under `/v1/projects/...`, so routing is on the full
path, most literal route first (`/v1/projects/p:getIamPolicy` is Resource Manager,
`/v1/projects/p/serviceAccounts` is IAM, `/v1/projects/p/secrets` Secret Manager). A method that takes
media (Cloud Storage's objects.insert) is routed a second time at its
`mediaUpload.protocols.simple.path`, which is absolute (`/upload/storage/v1/b/{bucket}/o`). The
documents are located without importing googleapiclient (the server needs only the JSON).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import re
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vmplane.sandbox.gcp.errors import ApiError, bad_request, invalid

log = logging.getLogger(__name__)

DOCUMENTS = ("compute.v1", "dns.v1", "iam.v1", "cloudresourcemanager.v1", "storage.v1", "secretmanager.v1")
_VAR = re.compile(r"\{(\+?)([^}]+)\}")


@dataclass(frozen=True)
class Method:
    api: str  # "compute", "dns", "iam", "cloudresourcemanager", "storage", "secretmanager"
    id: str  # "compute.networks.insert"
    http: str
    route: re.Pattern[str]  # from flatPath: only for routing
    path: re.Pattern[str]  # from path: gives the declared path parameters ({+name} spans slashes)
    literal: int  # literal characters in the route; the most literal route wins
    params: dict[str, Any]
    order: tuple[str, ...]
    request: str | None
    response: str | None
    upload: bool = False  # served at the method's mediaUpload path (`/upload/storage/v1/...`): a media body

    @property
    def resource(self) -> str:
        return self.id.split(".")[-2]

    @property
    def verb(self) -> str:
        return self.id.split(".")[-1]


@dataclass
class Api:
    name: str
    revision: str
    schemas: dict[str, Any]
    global_params: dict[str, Any]


@dataclass
class Discovery:
    apis: dict[str, Api] = field(default_factory=dict)
    routes: dict[tuple[str, int], list[Method]] = field(default_factory=dict)
    load_seconds: float = 0.0

    @property
    def revisions(self) -> dict[str, str]:
        return {name: api.revision for name, api in self.apis.items()}

    def route(self, http: str, path: str) -> tuple[Method, dict[str, str]]:
        """The method serving this request and its path parameters (decoded and pattern-checked)."""
        segments = path.count("/")
        for method in self.routes.get((http, segments), []):
            if not method.route.fullmatch(path):
                continue
            found = method.path.fullmatch(path)
            if found is None:  # flatPath matched but the declared path cannot: not this method
                continue
            params = {k: urllib.parse.unquote(v) for k, v in found.groupdict().items()}
            for name, value in params.items():
                pattern = method.params.get(name, {}).get("pattern")
                if pattern and not re.fullmatch(pattern.strip("^$"), value):
                    raise invalid(f"Invalid value for field '{name}': '{value}'. Must be a match of regex '{pattern}'")
            return method, params
        raise ApiError(404, "notFound", f"The requested URL {path} was not found on this server.")

    def query(self, method: Method, raw: dict[str, list[str]]) -> dict[str, Any]:
        """The query parameters, typed; an unknown one is refused as Google's front end does."""
        api = self.apis[method.api]
        out: dict[str, Any] = {}
        for name, values in raw.items():
            spec = method.params.get(name)
            if spec is None or spec.get("location") != "query":
                spec = api.global_params.get(name)
            if spec is None:
                raise invalid(f'Invalid JSON payload received. Unknown name "{name}": Cannot bind query parameter.')
            typed = [_typed_query(name, spec, v) for v in values]
            out[name] = typed if spec.get("repeated") else typed[-1]
        for name, spec in method.params.items():
            if spec.get("location") == "query" and spec.get("required") and name not in out:
                raise bad_request(f"Required parameter '{name}' not specified")
        return out


def _typed_query(name: str, spec: dict[str, Any], value: str) -> Any:
    kind = spec.get("type")
    if kind == "boolean":
        if value not in ("true", "false"):
            raise invalid(f"Invalid value for parameter '{name}': '{value}' is not a boolean")
        return value == "true"
    if kind == "integer":
        if not re.fullmatch(r"-?\d+", value):
            raise invalid(f"Invalid value for parameter '{name}': '{value}' is not an integer")
        return int(value)
    if "enum" in spec and value not in spec["enum"]:
        raise invalid(f"Invalid value for parameter '{name}': '{value}'. Must be one of {spec['enum']}")
    return value


def _regex(template: str, prefix: str) -> tuple[re.Pattern[str], int]:
    out, literal, pos = [], 0, 0
    for m in _VAR.finditer(template):
        text = template[pos : m.start()]
        out.append(re.escape(text))
        literal += len(text)
        out.append(f"(?P<{m.group(2)}>.+)" if m.group(1) else f"(?P<{m.group(2)}>[^/]+)")
        pos = m.end()
    out.append(re.escape(template[pos:]))
    literal += len(template) - pos
    return re.compile(re.escape(prefix) + "".join(out)), literal


def _methods(api: str, resources: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for res in resources.values():
        found.extend(res.get("methods", {}).values())
        found.extend(_methods(api, res.get("resources", {})))
    return found


def documents_dir() -> Path:
    spec = importlib.util.find_spec("googleapiclient")
    if spec is None or spec.origin is None:
        raise RuntimeError("google-api-python-client is not installed: the sandbox needs its discovery documents")
    return Path(spec.origin).parent / "discovery_cache" / "documents"


def load(directory: Path | None = None) -> Discovery:
    started = time.perf_counter()
    directory = directory or documents_dir()
    found = Discovery()
    for doc_name in DOCUMENTS:
        doc = json.loads((directory / f"{doc_name}.json").read_text())
        api = doc["name"]
        found.apis[api] = Api(api, doc["revision"], doc["schemas"], doc.get("parameters", {}))
        prefix = "/" + doc.get("servicePath", "")
        for m in _methods(api, doc.get("resources", {})):
            served = [(prefix, m.get("flatPath", m["path"]), m["path"], False)]
            simple = m.get("mediaUpload", {}).get("protocols", {}).get("simple", {}).get("path")
            if simple:
                served.append(("", simple, simple, True))
            for root, flat, declared, upload in served:
                route, literal = _regex(flat, root)
                path, _ = _regex(declared, root)
                method = Method(
                    api=api,
                    id=m["id"],
                    http=m["httpMethod"],
                    route=route,
                    path=path,
                    literal=literal,
                    params=m.get("parameters", {}),
                    order=tuple(m.get("parameterOrder", ())),
                    request=m.get("request", {}).get("$ref"),
                    response=m.get("response", {}).get("$ref"),
                    upload=upload,
                )
                found.routes.setdefault((method.http, (root + flat).count("/")), []).append(method)
    for candidates in found.routes.values():
        candidates.sort(key=lambda m: -m.literal)
    found.load_seconds = time.perf_counter() - started
    log.info("discovery documents %s loaded in %.3fs", found.revisions, found.load_seconds)
    return found


_lock = threading.Lock()
_loaded: Discovery | None = None


def get() -> Discovery:
    """The documents, loaded once per process (about 0.1 s, compute.v1 is 5 MB of JSON)."""
    global _loaded
    with _lock:
        if _loaded is None:
            _loaded = load()
        return _loaded
