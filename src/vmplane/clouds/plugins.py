"""Clouds from outside vmplane's tree: a plugin is a module that registers its `CloudSpec`
(`clouds.specs.register`) and its `Descriptor` (`clouds.registry.register`) when imported; an entry point
may instead name a function (`pkg.module:register`), which is called.

Two ways to name one: the entry-point group `vmplane.clouds` (an installed package), and, for development
and the tests, `VMPLANE_CLOUD_PLUGINS` (comma-separated module names). They are loaded once, lazily, by the
first look-up of a cloud (the spec list, the registry, or `Cloud("<name>")` reading a recorded job), so a
`vmplane validate/plan/apply` in another process sees them. With nothing configured this costs one
entry-point scan (~6 ms cold, measured with `importlib.metadata.entry_points(group=...)`).
"""

from __future__ import annotations

import importlib
import os
import threading
import types
from importlib.metadata import EntryPoint, entry_points

from vmplane.errors import UsageError

ENV_VAR = "VMPLANE_CLOUD_PLUGINS"
GROUP = "vmplane.clouds"

_lock = threading.RLock()
_entry_points_loaded = False
# The modules the variable named that were imported: a process forked from one that had loaded (the
# tests' fork server) gets another variable, and loads what it adds.
_modules_loaded: set[str] = set()
_failed: PluginError | None = None
_seen_variable: str | None = None  # the variable's value last loaded: the fast path of every look-up


class PluginError(UsageError):
    """A cloud plugin named by the environment or an entry point could not be loaded."""


def load_plugins(*, strict: bool = True) -> None:
    """Import every configured plugin once. Re-entrant: a plugin's own registration calls back in here
    through the look-ups it makes, and finds its load already under way.

    A plugin that fails is raised (a PluginError, a usage error) from every strict call, the look-up of a
    cloud; a listing (`strict=False`) goes on without it. Listings run while vmplane's modules import (the
    schema, the CLI's sub-commands), where a raise would be a traceback, not the CLI's one-line error."""
    global _entry_points_loaded, _failed, _seen_variable
    raw = os.environ.get(ENV_VAR, "")
    if raw != _seen_variable:
        names = configured_modules(raw)
        with _lock:
            try:
                if not _entry_points_loaded:
                    _entry_points_loaded = True  # first: the plugins' imports look clouds up too
                    for ep in entry_points(group=GROUP):
                        _run(_load_entry_point(ep))
                for name in names:
                    if name not in _modules_loaded:
                        _modules_loaded.add(name)
                        _run(_import(name, f"{ENV_VAR}={raw!r}"))
            except PluginError as err:
                _failed = _failed or err
            _seen_variable = raw
    if strict and _failed is not None:
        raise _failed


def configured_modules(raw: str) -> list[str]:
    """The module names of the variable's value, in its order."""
    return [m.strip() for m in raw.split(",") if m.strip()]


def _import(name: str, where: str) -> object:
    try:
        return importlib.import_module(name)
    except Exception as err:  # any failure of a plugin's import is the plugin's, named as such
        raise PluginError(
            f"cloud plugin {name!r} (from {where}) failed to import: {type(err).__name__}: {err}"
        ) from err


def _load_entry_point(ep: EntryPoint) -> object:
    try:
        return ep.load()
    except Exception as err:
        raise PluginError(
            f"cloud plugin {ep.value!r} (entry point {ep.name!r} in group {GROUP!r}) failed to import: "
            f"{type(err).__name__}: {err}"
        ) from err


def _run(loaded: object) -> None:
    """A module registered on import; an entry point naming a function has it called."""
    if isinstance(loaded, types.FunctionType):
        loaded()


def forget(name: str) -> None:
    """Let `name` be loaded again (a test that imported and unregistered it)."""
    global _failed, _seen_variable
    with _lock:
        _modules_loaded.discard(name)
        _failed, _seen_variable = None, None
