"""What a driver knows about the secret stores its VMs read (envspec/secrets.py).

The control plane never reads a secret's value to deliver it: the VM does, with its own identity. What
the control plane reads is metadata: whether each referenced secret exists and can be read (plan and
stepValidate refuse otherwise, naming the field), and its current version, so that a new version of an
unpinned secret makes the VMs' runtime settings stale and the next push or apply delivers it.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any

from vmplane.clouds.errors import InvalidRequestError
from vmplane.envspec.secrets import SecretRef


class SecretProblemsError(InvalidRequestError):
    """Every referenced secret the VMs could not read, each `"<field>: <ref>: <why>"` (`problems`), so
    that the precheck places each at its own field."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems), code="SecretNotReadable")


class SecretAccess(abc.ABC):
    @abc.abstractmethod
    def problems(self, refs: Mapping[str, SecretRef]) -> list[str]:
        """`"<field path>: <why>"` for each referenced secret that does not exist or cannot be read.
        Reads metadata; where only the value can answer (a `#json-key`), it is read, checked and dropped."""

    @abc.abstractmethod
    def versions(self, refs: Mapping[str, SecretRef]) -> dict[str, str | None]:
        """Each reference's (by its text) current version id, from metadata only; None where the store
        has no version vmplane can see (`env:`)."""

    def refuse_unreadable(self, refs: Mapping[str, SecretRef]) -> None:
        """SecretProblemsError listing every problem, each at its field (what preflight raises)."""
        if refs and (found := self.problems(refs)):
            raise SecretProblemsError(found)

    @abc.abstractmethod
    def guest_source(self) -> dict[str, Any]:
        """What the VM-side fetcher needs to reach the store from the VM (cloud, region or project, the
        endpoints: the sandbox's own when the target is the sandbox). Holds no credential."""
