"""A sandbox VM's metadata server, the part a secret fetcher reads (no VM boots, so a test or a fetcher
run on the test host plays the VM and asks here instead of http://metadata.google.internal).

`GET /_sandbox/metadata/projects/P/zones/Z/instances/I/computeMetadata/v1/<path>` answers as instance I's
metadata server would, with the header `Metadata-Flavor: Google` required (403 without, as Google's):
- `instance/service-accounts/default/token`: `{"access_token": "sandbox-sa:EMAIL", "expires_in": 3599,
  "token_type": "Bearer"}` for the instance's service account: the token Secret Manager's sandbox takes as
  that account (secretmanager.py), so an accessor binding decides, as on Google;
- `instance/service-accounts/default/email`, `project/project-id`, `project/numeric-project-id`: text.
An instance without a service account has no token (404), as on Google.
"""

from __future__ import annotations

import json
import re

from vmplane.sandbox.gcp.secretmanager import SA_TOKEN
from vmplane.sandbox.gcp.storage_media import Raw
from vmplane.sandbox.gcp.store import State

PREFIX = "metadata/"
_PATH = re.compile(r"metadata/projects/([^/]+)/zones/([^/]+)/instances/([^/]+)/computeMetadata/v1/(.+)")


def _text(status: int, body: str, kind: str = "application/text") -> Raw:
    return Raw(status, body.encode(), {"Content-Type": kind, "Metadata-Flavor": "Google"})


def answer(state: State, action: str, headers: dict[str, str]) -> Raw:
    found = _PATH.fullmatch(action)
    if found is None:
        return _text(404, "not found")
    if headers.get("metadata-flavor") != "Google":  # the real server's guard against forwarded requests
        return _text(403, "Missing Metadata-Flavor:Google header.")
    project_id, zone, name, what = found.groups()
    project = state.project(project_id)
    instance = project.compute.get(f"zones/{zone}/instances/{name}")
    if instance is None:
        return _text(404, f"no instance {project_id}/{zone}/{name} in the sandbox")
    accounts = instance.get("serviceAccounts") or []
    email = str(accounts[0]["email"]) if accounts else ""
    if what == "project/project-id":
        return _text(200, project.id)
    if what == "project/numeric-project-id":
        return _text(200, project.number)
    if what.startswith("instance/service-accounts/default/") and not email:
        return _text(404, "The instance has no service account.")
    if what == "instance/service-accounts/default/email":
        return _text(200, email)
    if what == "instance/service-accounts/default/token":
        token = {"access_token": SA_TOKEN + email, "expires_in": 3599, "token_type": "Bearer"}
        return _text(200, json.dumps(token), "application/json")
    return _text(404, f"the sandbox's metadata stand-in does not serve {what}")
