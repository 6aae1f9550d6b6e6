"""`google.cloud.compute_v1` without loading all of it.

The package's `__init__` imports every one of its ~130 service clients (1.3 s of the 2 s it takes; its
message types are the other 0.7 s), and every `vmplane apply`/`destroy` on Google Cloud pays that once per
process, for the ~15 clients it uses. `install()` registers the package module without running its
`__init__`: `compute_v1.XClient` imports only `services/x`, any other public name comes from
`compute_v1.types`, a submodule loads as usual, and any other attribute (`__all__`, a star-import) runs the
real `__init__` in place, so every name the package exports is still there. Python 3.15 will do this
itself through the package's `__lazy_modules__`.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import threading
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

PACKAGE = "google.cloud.compute_v1"
_lock = threading.RLock()
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def install() -> None:
    """Make `google.cloud.compute_v1` lazy in this process (a no-op once it is imported, either way)."""
    with _lock:
        if PACKAGE in sys.modules:
            return
        spec = importlib.util.find_spec(PACKAGE)
        if spec is None or spec.loader is None:
            return  # not installed: the import fails later, where it is used, as it would have
        module = importlib.util.module_from_spec(spec)

        def __getattr__(name: str) -> Any:  # PEP 562: called only for names not set yet
            return _resolve(module, spec, name)

        module.__dict__["__getattr__"] = __getattr__
        sys.modules[PACKAGE] = module
        sys.modules["google.cloud"].__dict__["compute_v1"] = module  # what a finished import sets on the parent


def _resolve(module: ModuleType, spec: ModuleSpec, name: str) -> Any:
    value: Any = None
    if re.fullmatch(r"[a-z_][a-z0-9_]*", name) and not name.startswith("__"):
        if importlib.util.find_spec(f"{PACKAGE}.{name}") is not None:  # gapic_version, services, types
            value = importlib.import_module(f"{PACKAGE}.{name}")
    elif name.endswith("Client") and name[:1].isupper():
        service = _CAMEL.sub("_", name.removesuffix("Client")).lower()
        if importlib.util.find_spec(f"{PACKAGE}.services.{service}") is not None:
            value = getattr(importlib.import_module(f"{PACKAGE}.services.{service}"), name, None)
    elif name[:1].isupper():
        value = getattr(importlib.import_module(f"{PACKAGE}.types"), name, None)
    if value is None:
        value = _load_all(module, spec, name)
    setattr(module, name, value)
    return value


def _load_all(module: ModuleType, spec: ModuleSpec, name: str) -> Any:
    """Run the package's own `__init__` in the lazy module, once, then look `name` up as usual."""
    assert spec.loader is not None
    with _lock:
        if module.__dict__.pop("__getattr__", None) is not None:
            spec.loader.exec_module(module)
    if name in module.__dict__:
        return module.__dict__[name]
    raise AttributeError(f"module {PACKAGE!r} has no attribute {name!r}")
