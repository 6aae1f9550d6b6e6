"""clouds/gcp/discovery.py's Protocols against the discovery documents google-api-python-client ships:
every collection and method they name exists, every parameter they take is the method's (in the client's
spelling: `options.requestedPolicyVersion` is `options_requestedPolicyVersion`), and none of a method's
required parameters is missing. The Protocols are what mypy checks the GCP calls against, and the real
client never reads them, so only this test keeps them true."""

from __future__ import annotations

import inspect
import json
import re
from importlib import resources
from typing import Any, get_type_hints

import pytest

from vmplane.clouds.gcp import discovery

ROOTS = {
    "dns.v1": discovery.DnsApi,
    "iam.v1": discovery.IamApi,
    "cloudresourcemanager.v1": discovery.CrmApi,
    "secretmanager.v1": discovery.SecretManagerApi,
}


def _document(name: str) -> dict[str, Any]:
    docs = resources.files("googleapiclient") / "discovery_cache" / "documents"
    return json.loads((docs / f"{name}.json").read_text())


def _client_name(param: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", param)  # googleapiclient's key2param, for the names used here


def _methods(proto: type) -> dict[str, Any]:
    return {n: f for n, f in vars(proto).items() if inspect.isfunction(f) and not n.startswith("_")}


def _problems(proto: type, node: dict[str, Any], where: str) -> list[str]:
    out = []
    for name, fn in _methods(proto).items():
        returns = get_type_hints(fn)["return"]
        if returns is discovery.Request:
            method = node.get("methods", {}).get(name)
            if method is None:
                out.append(f"{where}.{name}: no such method")
                continue
            params = {_client_name(p): spec for p, spec in method.get("parameters", {}).items()}
            if "request" in method:
                params["body"] = {"required": True}
            taken = [p for p in inspect.signature(fn).parameters if p != "self"]
            out += [f"{where}.{name}({p}=): no such parameter" for p in taken if p not in params]
            required = {p for p, spec in params.items() if spec.get("required")}
            out += [f"{where}.{name}: required {p} not taken" for p in sorted(required - set(taken))]
        else:
            sub = node.get("resources", {}).get(name)
            if sub is None:
                out.append(f"{where}.{name}(): no such collection")
                continue
            out += _problems(returns, sub, f"{where}.{name}")
    return out


@pytest.mark.parametrize("api", sorted(ROOTS))
def test_each_protocol_matches_the_bundled_discovery_document(api):
    assert _problems(ROOTS[api], _document(api), api) == []


def test_a_wrong_name_is_caught():
    class Wrong(discovery.DnsApi):
        def changes(self) -> discovery.Changes: ...

    class BadChanges(discovery.Changes):
        def get(self, *, project: str, managedZone: str, change: str) -> discovery.Request: ...

    Wrong.changes.__annotations__["return"] = BadChanges
    assert _problems(Wrong, _document("dns.v1"), "dns.v1") == [
        "dns.v1.changes.get(change=): no such parameter",
        "dns.v1.changes.get: required changeId not taken",
    ]
