"""The simulated guest: no VM boots, so what a guest would write is either simulated (mode `auto`,
marked `simulated`) or left to a test that plays the guest (mode `off`, POST /_sandbox/guest-attributes).

Conventions (vmplane's GCP driver and its in-VM agent share them):
- readiness: guest attribute `vmplane/bootstrap` = `ready` (plus `vmplane/simulated` = `true` here);
- exec mailbox: instance metadata `vmplane-exec` = `{"id": "<hex>", "script": "<base64 bash>",
  "timeout": <s>}`; the agent answers in guest attribute `vmplane-exec/<id>` with JSON
  `{"exitCode": int, "stdout": str, "stderr": str}`. The simulated guest runs nothing: it answers
  `{"exitCode": 0, "stdout": "", "stderr": "", "simulated": true}`.
A guest can write attributes only when metadata `enable-guest-attributes` is `TRUE`, so the simulated
guest writes nothing otherwise either.
"""

from __future__ import annotations

import json

from vmplane.sandbox.gcp.errors import not_found
from vmplane.sandbox.gcp.store import Resource, State

EXEC_KEY = "vmplane-exec"


def metadata_value(instance: Resource, key: str) -> str | None:
    for item in instance.get("metadata", {}).get("items", []):
        if item.get("key") == key:
            return str(item.get("value", ""))
    return None


def enabled(instance: Resource) -> bool:
    return (metadata_value(instance, "enable-guest-attributes") or "").upper() == "TRUE"


def put(instance: Resource, namespace: str, key: str, value: str) -> None:
    instance.setdefault("_guest", {})[f"{namespace}/{key}"] = value


def on_running(state: State, instance: Resource) -> None:
    """The instance reached RUNNING: a booted guest would have signalled readiness by now."""
    if state.guest_mode == "auto" and enabled(instance):
        put(instance, "vmplane", "bootstrap", "ready")
        put(instance, "vmplane", "simulated", "true")
        answer_exec(state, instance)


def on_metadata(state: State, instance: Resource) -> None:
    if instance.get("status") == "RUNNING":
        answer_exec(state, instance)


def answer_exec(state: State, instance: Resource) -> None:
    if state.guest_mode != "auto" or not enabled(instance):
        return
    raw = metadata_value(instance, EXEC_KEY)
    if not raw:
        return
    try:
        request = json.loads(raw)
        exec_id = str(request["id"])
    except (ValueError, KeyError, TypeError):
        return  # an agent ignores a mailbox it cannot read; so does the simulated one
    if f"{EXEC_KEY}/{exec_id}" not in instance.get("_guest", {}):
        answer = {"exitCode": 0, "stdout": "", "stderr": "", "simulated": True}
        put(instance, EXEC_KEY, exec_id, json.dumps(answer))


def query(instance: Resource, query_path: str | None, variable_key: str | None) -> Resource:
    """compute#guestAttributes for a `queryPath` (`ns/` or `ns/key`) or a `variableKey`."""
    attributes: dict[str, str] = instance.get("_guest", {})
    link = instance["selfLink"] + "/guestAttributes"
    out: Resource = {"kind": "compute#guestAttributes", "selfLink": link}
    if variable_key:
        if variable_key not in attributes:
            raise not_found(f"{_short(link)}/{variable_key}")
        out.update(variableKey=variable_key, variableValue=attributes[variable_key])
        return out
    path = query_path or ""
    items = [
        {"namespace": k.split("/", 1)[0], "key": k.split("/", 1)[1], "value": v}
        for k, v in sorted(attributes.items())
        if (k.startswith(path) if path.endswith("/") or not path else k == path)
    ]
    if not items:  # Google answers 404 when nothing matches the query (and when attributes are off)
        raise not_found(f"{_short(link)}/{path}")
    out.update(queryPath=path, queryValue={"items": items})
    return out


def _short(link: str) -> str:
    return link.split("/compute/v1/", 1)[1]
