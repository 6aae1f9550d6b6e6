"""Typed faces of the google-api-python-client services vmplane calls (Cloud DNS, IAM, Resource Manager,
Secret Manager).

A discovery client builds its resources and methods at run time from the bundled discovery document, so
the library has no types at all. These Protocols name only the collections and methods vmplane calls,
with each method's parameters as the document spells them (keyword-only, as the client requires): mypy
then checks the method names and argument names of every call. Response bodies stay `Body`: the
documents give their schemas only as JSON, and vmplane reads a few fields of each with `.get`.

A wrong name here fails nothing at run time (the real client is returned unchanged by the session), so
the tests that drive each call against the sandbox, which serves from the same documents, keep them right.
"""

from __future__ import annotations

from typing import Any, Protocol

Body = dict[str, Any]  # a JSON object, as the discovery client returns and takes it


class Request(Protocol):
    """An `HttpRequest`: nothing is sent until `execute`."""

    def execute(self) -> Body: ...


# ---- Cloud DNS v1 ----
class ManagedZones(Protocol):
    def get(self, *, project: str, managedZone: str) -> Request: ...
    def list(self, *, project: str, pageToken: str | None = None, dnsName: str = ...) -> Request: ...


class ResourceRecordSets(Protocol):
    def list(
        self, *, project: str, managedZone: str, name: str = ..., type: str = ..., pageToken: str | None = None
    ) -> Request: ...


class Changes(Protocol):
    def create(self, *, project: str, managedZone: str, body: Body) -> Request: ...
    def get(self, *, project: str, managedZone: str, changeId: str) -> Request: ...


class DnsApi(Protocol):
    def managedZones(self) -> ManagedZones: ...
    def resourceRecordSets(self) -> ResourceRecordSets: ...
    def changes(self) -> Changes: ...


# ---- IAM v1 ----
class ServiceAccounts(Protocol):
    def get(self, *, name: str) -> Request: ...
    def create(self, *, name: str, body: Body) -> Request: ...
    def patch(self, *, name: str, body: Body) -> Request: ...
    def delete(self, *, name: str) -> Request: ...


class Roles(Protocol):
    def get(self, *, name: str) -> Request: ...


class IamProjects(Protocol):
    def serviceAccounts(self) -> ServiceAccounts: ...
    def roles(self) -> Roles: ...


class IamOrganizations(Protocol):
    def roles(self) -> Roles: ...


class IamApi(Protocol):
    def projects(self) -> IamProjects: ...
    def organizations(self) -> IamOrganizations: ...
    def roles(self) -> Roles: ...  # the predefined roles (`roles/...`)


# ---- Cloud Resource Manager v1 ----
class CrmProjects(Protocol):
    def get(self, *, projectId: str) -> Request: ...
    def getIamPolicy(self, *, resource: str, body: Body) -> Request: ...
    def setIamPolicy(self, *, resource: str, body: Body) -> Request: ...


class CrmApi(Protocol):
    def projects(self) -> CrmProjects: ...


# ---- Secret Manager v1 ----
class SecretVersions(Protocol):
    def get(self, *, name: str) -> Request: ...


class Secrets(Protocol):
    def get(self, *, name: str) -> Request: ...
    def versions(self) -> SecretVersions: ...
    def testIamPermissions(self, *, resource: str, body: Body) -> Request: ...
    def getIamPolicy(self, *, resource: str, options_requestedPolicyVersion: int = ...) -> Request: ...
    def setIamPolicy(self, *, resource: str, body: Body) -> Request: ...


class SecretManagerProjects(Protocol):
    def secrets(self) -> Secrets: ...


class SecretManagerApi(Protocol):
    def projects(self) -> SecretManagerProjects: ...
