"""Secrets on Proxmox VE: no store, so a reference is `env:VAR`, the operator's environment at push time.

vmplane reads `os.environ[VAR]` when it pushes and sends the value inside the guest-agent script (the
only way onto a VM without a cloud identity); it is never stored. Here only whether each variable is
set: there is no version to read, so a spec with `env:` references is pushed at every push or apply.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from vmplane.clouds.secret_access import SecretAccess
from vmplane.envspec.secrets import SecretRef, SecretStore


class EnvSecretAccess(SecretAccess):
    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = environ  # None: the process's own, read at each call (a test may set it late)

    @property
    def environ(self) -> Mapping[str, str]:
        return os.environ if self._environ is None else self._environ

    def problems(self, refs: Mapping[str, SecretRef]) -> list[str]:
        out = []
        for field, ref in refs.items():
            if ref.store is not SecretStore.env:
                out.append(f"{field}.secret: {ref.store.value}: is not a secret store on proxmox; use env:VAR")
            elif ref.name not in self.environ:
                out.append(
                    f"{field}.secret: env:{ref.name} is not set in vmplane's environment; set {ref.name} "
                    "where vmplane runs (it is read at push time and never stored)"
                )
        return out

    def versions(self, refs: Mapping[str, SecretRef]) -> dict[str, str | None]:
        return {ref.text: None for ref in refs.values()}

    def guest_source(self) -> dict[str, Any]:
        return {"cloud": "proxmox"}
