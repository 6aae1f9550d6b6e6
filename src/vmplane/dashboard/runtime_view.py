"""What the dashboard shows of an environment's runtime settings: references as `🔒 aws-sm:prod/db#password`,
never a value vmplane does not hold anyway. A plain value whose name looks like a secret is the user's choice
and stays plain in the record (the API answers it as written), but the dashboard masks it: a page is seen by
every viewer of the org and over shoulders, and the warning beside it points at the reference syntax. A
plain file's content is not shown at all (its size is): files are often keys or certificates, and long."""

from __future__ import annotations

from dataclasses import dataclass

from vmplane.envspec.models import EnvSpec, Secret
from vmplane.envspec.secrets import field_path, secret_like


@dataclass(frozen=True)
class RuntimeRow:
    kind: str  # "env" or "files"
    key: str  # the variable's name or the file's path
    path: str  # its field path, as validate and plan name it
    ref: str | None = None  # the reference text of a secret
    shown: str | None = None  # a plain value that may be shown as it is
    masked: bool = False  # a plain value named like a secret: hidden here, warned about
    size: int | None = None  # a plain file's length in bytes


def runtime_rows(spec: EnvSpec) -> list[RuntimeRow]:
    rows: list[RuntimeRow] = []
    for kind, values in (("env", spec.runtime.env), ("files", spec.runtime.files)):
        for key, value in sorted(values.items()):
            path = field_path(kind, key)
            if isinstance(value, Secret):
                rows.append(RuntimeRow(kind, key, path, ref=value.ref.text))
            elif secret_like(key):
                rows.append(RuntimeRow(kind, key, path, masked=True))
            elif kind == "files":
                rows.append(RuntimeRow(kind, key, path, size=len(value.encode())))
            else:
                rows.append(RuntimeRow(kind, key, path, shown=value))
    return rows
