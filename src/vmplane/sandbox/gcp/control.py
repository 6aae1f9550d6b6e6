"""The sandbox's own endpoints under `/_sandbox/` (not Google's API; tests and vmplane use them):

- `GET  /_sandbox/status`: `{"sandbox": "gcp", "revisions": {...}, "discoverySeconds": s}` (liveness).
- `POST /_sandbox/reset`: forget every project (they come back, seeded, on first use); guest mode `auto`.
- `GET  /_sandbox/state?project=P`: every stored resource of P (default vmplane-sandbox) as JSON, with
  the discovery documents' revisions, for debugging (Cloud Storage: P's buckets, object metadata only).
- `POST /_sandbox/guest` `{"mode": "auto"|"off"}`: `auto` (default) simulates what a booted guest writes
  (guest.py); `off` writes nothing, so a test can play the guest.
- `POST /_sandbox/guest-attributes` `{"project", "zone", "instance", "namespace", "key", "value"}`: write a
  guest attribute as the guest would (PUT to the metadata server from inside the VM).
- `POST /_sandbox/page-size` `{"size": n}`: every compute list answers at most n items a page (0: Google's 500),
  so a client's pager is driven past page one; `reset` restores 0.
- `GET  /_sandbox/secret-accesses?project=P`: every Secret Manager payload access of P, oldest first:
  `{"secret", "version", "caller", "time", "outcome"}` (caller per secretmanager.caller; never a value).
- `GET  /_sandbox/metadata/projects/P/zones/Z/instances/I/computeMetadata/v1/...`: instance I's metadata
  server as a secret fetcher reads it (its service account's token and email; secretmanager_metadata.py).
- `POST /_sandbox/certificates/activate` `{"project", "name"}`: DNS now resolves to the load balancer,
  so the managed certificate (and each of its domains) becomes ACTIVE.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vmplane.sandbox.gcp import secretmanager, secretmanager_metadata
from vmplane.sandbox.gcp.errors import ApiError, bad_request, invalid, not_found
from vmplane.sandbox.gcp.store import DEFAULT_PROJECT, public

if TYPE_CHECKING:
    from vmplane.sandbox.gcp.server import GcpSandbox


def handle(
    sandbox: GcpSandbox, http: str, path: str, query: dict[str, list[str]], body: Any, headers: dict[str, str]
) -> Any:
    state = sandbox.state
    action = path.removeprefix("/_sandbox/")
    if http == "GET" and action.startswith(secretmanager_metadata.PREFIX):
        return secretmanager_metadata.answer(state, action, headers)
    if http == "GET" and action == "status":
        return {
            "sandbox": "gcp",
            "revisions": sandbox.discovery.revisions,
            "discoverySeconds": round(sandbox.discovery.load_seconds, 3),
            "defaultProject": DEFAULT_PROJECT,
        }
    if http == "GET" and action == "secret-accesses":
        project = state.project(query.get("project", [DEFAULT_PROJECT])[-1])
        return {"project": project.id, "accesses": project.secret_accesses}
    if http == "GET" and action == "state":
        project = state.project(query.get("project", [DEFAULT_PROJECT])[-1])
        return {
            "project": project.id,
            "projectNumber": project.number,
            "revisions": sandbox.discovery.revisions,
            "guestMode": state.guest_mode,
            "compute": {
                k: {**public(r), **({"_guest": r["_guest"]} if "_guest" in r else {})}
                for k, r in project.compute.items()
            },
            "operations": project.operations,
            "dns": {z: list(project.dns_records[z].values()) for z in project.dns_zones},
            "serviceAccounts": project.service_accounts,
            "iamPolicy": project.policy,
            "secrets": secretmanager.dump(project),  # metadata only, never a payload
            "buckets": {  # the project's Cloud Storage buckets and their objects' generations (no data)
                name: {"bucket": b, "objects": {k: [public(v) for v in vs] for k, vs in state.objects[name].items()}}
                for name, b in state.buckets.items()
                if b["projectNumber"] == project.number
            },
        }
    if http != "POST":
        raise ApiError(404, "notFound", f"no sandbox control endpoint {http} {path}")
    given: dict[str, Any] = body if isinstance(body, dict) else {}
    if action == "reset":
        state.reset()
        return {"reset": True}
    if action == "guest":
        mode = given.get("mode")
        if mode not in ("auto", "off"):
            raise invalid(f"guest mode must be 'auto' or 'off', not {mode!r}")
        state.guest_mode = mode
        return {"mode": mode}
    if action == "page-size":
        size = given.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= 500:
            raise invalid(f"page size must be an integer within 0..500, not {size!r}")
        state.page_size = size
        return {"size": size}
    if action == "guest-attributes":
        from vmplane.sandbox.gcp.guest import put

        instance = _compute(sandbox, given, f"zones/{given.get('zone')}/instances/{given.get('instance')}")
        put(instance, str(given["namespace"]), str(given["key"]), str(given["value"]))
        return {"written": f"{given['namespace']}/{given['key']}"}
    if action == "certificates/activate":
        from vmplane.sandbox.gcp.compute_lb import activate_certificate

        cert = _compute(sandbox, given, f"global/sslCertificates/{given.get('name')}")
        if cert.get("type") != "MANAGED":
            raise bad_request(f"certificate {given.get('name')} is not a managed certificate")
        activate_certificate(cert)
        return public(cert)
    raise ApiError(404, "notFound", f"no sandbox control endpoint {http} {path}")


def _compute(sandbox: GcpSandbox, given: dict[str, Any], key: str) -> dict[str, Any]:
    missing = [k for k in ("namespace", "key", "value") if k not in given and key.startswith("zones/")]
    if missing:
        raise bad_request(f"missing {', '.join(missing)}")
    project = sandbox.state.project(str(given.get("project") or DEFAULT_PROJECT))
    found = project.compute.get(key)
    if found is None:
        raise not_found(f"projects/{project.id}/{key}")
    return found
