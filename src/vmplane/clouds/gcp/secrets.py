"""Google Secret Manager, as the control plane sees it: metadata only.

`problems` and `versions` call `projects.secrets.versions.get` (never `access`: the control plane does
not read a value to deliver it; the VM reads it with its own service account, clouds/gcp/secret_iam.py
granting that account `roles/secretmanager.secretAccessor` on each referenced secret). A reference
`gcp-sm:NAME` is in the environment's project; `gcp-sm:projects/P2/secrets/NAME` in project P2.
An unpinned reference is `latest`, the most recently created version: when that one is disabled or
destroyed, the VM's `access` of `latest` fails (FAILED_PRECONDITION), so plan refuses it too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vmplane.clouds.errors import AuthError, NotFoundError
from vmplane.clouds.gcp.discovery import SecretVersions
from vmplane.clouds.gcp.session import GcpClients
from vmplane.clouds.secret_access import SecretAccess
from vmplane.envspec.models import EnvSpec
from vmplane.envspec.secrets import SecretRef, SecretStore, secret_refs

METADATA_URL = "http://metadata.google.internal"
SECRETMANAGER_URL = "https://secretmanager.googleapis.com"
# What the control plane needs to check a reference (roles/secretmanager.viewer holds it) and to grant the
# VM's account on the secret (roles/secretmanager.admin holds both).
GET_PERMISSION = "secretmanager.versions.get"
SET_PERMISSION = "secretmanager.secrets.setIamPolicy"
ACCESSOR = "roles/secretmanager.secretAccessor"  # the VMs' account gets it on each referenced secret
READABLE = "ENABLED"


def secret_resource(project: str, ref: SecretRef) -> str:
    """`projects/P/secrets/NAME` of a gcp-sm reference (its own project when it names one)."""
    return ref.name if ref.name.startswith("projects/") else f"projects/{project}/secrets/{ref.name}"


def secret_parts(resource: str) -> tuple[str, str]:
    """(project, secret id) of `projects/P/secrets/NAME`."""
    parts = resource.split("/")
    return parts[1], parts[3]


def version_resource(project: str, ref: SecretRef) -> str:
    return f"{secret_resource(project, ref)}/versions/{ref.version or 'latest'}"


def gcp_refs(refs: Mapping[str, SecretRef]) -> dict[str, SecretRef]:
    """The Google Secret Manager references (validate refuses another store on GCP; skipped here)."""
    return {path: ref for path, ref in refs.items() if ref.store is SecretStore.gcp_sm}


def referenced_secrets(project: str, spec: EnvSpec) -> dict[str, str]:
    """Each referenced secret's resource name -> the first field that references it, sorted by name."""
    out: dict[str, str] = {}
    for path, ref in gcp_refs(secret_refs(spec)).items():
        out.setdefault(secret_resource(project, ref), path)
    return dict(sorted(out.items()))


class GcpSecretAccess(SecretAccess):
    def __init__(self, gcp: GcpClients) -> None:
        self.gcp = gcp

    def _versions(self) -> SecretVersions:
        return self.gcp.secretmanager.projects().secrets().versions()

    def _get_version(self, ref: SecretRef) -> dict[str, Any]:
        name = version_resource(self.gcp.project, ref)
        versions = self._versions()
        out: dict[str, Any] = self.gcp.call(
            "secretmanager.projects.secrets.versions.get", lambda: versions.get(name=name).execute()
        )
        return out

    def _secret_exists(self, ref: SecretRef) -> bool:
        name = secret_resource(self.gcp.project, ref)
        secrets = self.gcp.secretmanager.projects().secrets()
        try:
            self.gcp.call("secretmanager.projects.secrets.get", lambda: secrets.get(name=name).execute())
        except NotFoundError:
            return False
        return True

    def _problem(self, ref: SecretRef) -> str | None:
        """Why the VM could not read `ref` (None: it exists, and its version is enabled)."""
        project, secret = secret_parts(secret_resource(self.gcp.project, ref))
        try:
            version = self._get_version(ref)
        except NotFoundError:
            if not self._secret_exists(ref):
                return f"no such secret in project {project}"
            if ref.version:
                return f"secret {secret} has no version {ref.version} in project {project}"
            return f"secret {secret} has no version in project {project}; add one (versions add)"
        except AuthError as e:
            return (
                f"permission denied reading its metadata in project {project} ({e.code}): the credentials need "
                f"{GET_PERMISSION} on projects/{project}/secrets/{secret} (roles/secretmanager.viewer)"
            )
        state = str(version.get("state", READABLE))
        if state != READABLE:
            number = str(version.get("name", "")).rsplit("/", 1)[-1]
            return f"version {number} of secret {secret} is {state}: the VM cannot read it; enable it or pin another"
        if not self._can_grant(ref):  # else stepCreateIAM would fail after the network is made
            return (
                f"the credentials cannot grant the VMs' service account access to it: they lack {SET_PERMISSION} "
                f"on projects/{project}/secrets/{secret} (roles/secretmanager.admin)"
            )
        return None

    def _can_grant(self, ref: SecretRef) -> bool:
        name = secret_resource(self.gcp.project, ref)
        secrets = self.gcp.secretmanager.projects().secrets()
        body = {"permissions": [SET_PERMISSION]}
        held: dict[str, Any] = self.gcp.call(
            "secretmanager.projects.secrets.testIamPermissions",
            lambda: secrets.testIamPermissions(resource=name, body=body).execute(),
        )
        return SET_PERMISSION in held.get("permissions", [])

    def problems(self, refs: Mapping[str, SecretRef]) -> list[str]:
        seen: dict[str, str | None] = {}  # one lookup per reference, however many fields use it
        out = []
        for path, ref in gcp_refs(refs).items():
            if ref.text not in seen:
                seen[ref.text] = self._problem(ref)
            if (why := seen[ref.text]) is not None:
                out.append(f"{path}: {ref.text}: {why}")
        return out

    def versions(self, refs: Mapping[str, SecretRef]) -> dict[str, str | None]:
        """The version number each reference resolves to: `latest` is Google's alias of the most recently
        created version, whatever its state (`problems` refuses it when that one is not ENABLED)."""
        out: dict[str, str | None] = {}
        for ref in gcp_refs(refs).values():
            if ref.text in out:
                continue
            try:
                name = str(self._get_version(ref).get("name", ""))
            except NotFoundError as e:  # gone since plan checked it: say which reference, never a value
                raise NotFoundError(f"{ref.text}: {self._problem(ref) or e}", code=e.code, operation=e.operation) from e
            out[ref.text] = name.rsplit("/", 1)[-1] or None
        return out

    def guest_source(self) -> dict[str, Any]:
        # On the sandbox Secret Manager is the sandbox's own endpoint. The metadata server stays Google's
        # address: this answer is per environment, and the sandbox's stand-in is per instance
        # (`{endpoint}/_sandbox/metadata/projects/P/zones/Z/instances/I`); no VM boots there to run the
        # fetcher, so a test playing a VM points its fetcher at that instance's stand-in itself.
        return {
            "cloud": "gcp",
            "project": self.gcp.project,
            "endpoints": {
                "metadata": METADATA_URL,
                "secretmanager": self.gcp.target.endpoint_url or SECRETMANAGER_URL,
            },
        }
