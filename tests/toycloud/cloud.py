"""The toy cloud's "API": resources in one JSON file, each call a read-modify-write under a lock, written
atomically (a temporary file renamed over the old one), so a `kill -9` of the CLI leaves the file whole.

Every call goes through vmplane's `Transport` (the step's API-call tally, errors translated, the fault hook
`VMPLANE_TEST_HANG_AFTER_CALL` after mutating calls). The hook's guard is the file itself: it says it is a
toy cloud (`"provider": "toy"`), which no real cloud's endpoint does.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from vmplane.clouds.errors import CloudError, ConflictError, InvalidRequestError, NotFoundError, TransientError
from vmplane.clouds.transport import Transport

T = TypeVar("T")
Resource = dict[str, Any]  # {"id", "kind", "name", "tags": {...}, "attrs": {...}}
PROVIDER = "toy"


class ToyCloud:
    def __init__(self, path: str) -> None:
        self.given = path
        self.path = Path(path)
        self.writes_log = writes_log(self.path)
        self._lock = threading.Lock()  # a step's parts may call side by side
        self.transport = Transport(
            "toy",
            translate=_translate,
            endpoint=lambda _name: str(self.path),
            is_sandbox=lambda: self._load().get("provider") == PROVIDER,
            hooked=lambda name: not name.startswith(("toy.List", "toy.Get")),  # a read changes nothing
        )

    # ---- the calls ----
    def list(self, kind: str, tags: Mapping[str, str] | None = None) -> list[Resource]:
        """Resources of `kind` carrying every tag in `tags`."""
        want = dict(tags or {})

        def read() -> list[Resource]:
            rows = self._load()["resources"].values()
            return [r for r in rows if r["kind"] == kind and want.items() <= r["tags"].items()]

        return self.transport.call(f"toy.List{kind.title()}", read)

    def get(self, rid: str) -> Resource | None:
        def read() -> Resource | None:
            row: Resource | None = self._load()["resources"].get(rid)
            return row

        return self.transport.call("toy.Get", read)

    def create(self, kind: str, name: str, tags: Mapping[str, str], attrs: Mapping[str, Any]) -> Resource:
        def write(state: dict[str, Any]) -> Resource:
            if any(r["kind"] == kind and r["name"] == name for r in state["resources"].values()):
                raise ConflictError(f"a toy {kind} named {name!r} exists")
            state["seq"] += 1
            row = {
                "id": f"toy-{kind}-{state['seq']}",
                "kind": kind,
                "name": name,
                "tags": dict(tags),
                "attrs": dict(attrs),
            }
            state["resources"][row["id"]] = row
            return row

        return self.transport.call(f"toy.Create{kind.title()}", lambda: self._change(f"create {kind}", write))

    def update(
        self, rid: str, *, attrs: Mapping[str, Any] | None = None, tags: Mapping[str, str] | None = None
    ) -> None:
        def write(state: dict[str, Any]) -> None:
            row = state["resources"].get(rid)
            if row is None:
                raise NotFoundError(f"toy resource {rid} does not exist")
            row["attrs"].update(attrs or {})
            if tags is not None:
                row["tags"] = dict(tags)

        self.transport.call("toy.Update", lambda: self._change("update", write))

    def delete(self, rid: str) -> bool:
        """False when it was already gone (a delete of what is gone is done)."""

        def write(state: dict[str, Any]) -> bool:
            return state["resources"].pop(rid, None) is not None

        return self.transport.call("toy.Delete", lambda: self._change("delete", write))

    # ---- the file ----
    def _load(self) -> dict[str, Any]:
        if not self.given:
            raise InvalidRequestError("provider.stateFile: the toy cloud needs its state file")
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return {"provider": PROVIDER, "seq": 0, "resources": {}}
        state: dict[str, Any] = json.loads(text)
        return state

    def _change(self, what: str, fn: Callable[[dict[str, Any]], T]) -> T:
        state = self._load()  # refuses a missing path before the lock file is made
        with self._locked():
            state = self._load()
            out = fn(state)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            with tmp.open("w") as f:
                json.dump(state, f, indent=1, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            tmp.replace(self.path)  # atomic: a reader (or a kill) sees the old file or the new one
            with self.writes_log.open("a") as log:  # the emulator's request log (the contract's re-run check)
                log.write(f"{what}\n")
            return out

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """One writer at a time, within the process (threads) and across processes (flock)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock, self.path.with_name(f".{self.path.name}.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


def writes_log(path: Path) -> Path:
    """Every write made to the cloud at `path`, one line each, in order."""
    return path.with_name(f"{path.name}.writes")


def _translate(err: Exception, name: str) -> CloudError:
    if isinstance(err, CloudError):
        return err
    if isinstance(err, OSError | json.JSONDecodeError):
        return TransientError(f"{name}: the toy cloud's file: {err}")
    return CloudError(f"{name}: {type(err).__name__}: {err}")
