"""botocore's service models, loaded once per process, and text values (form, header, query string,
XML) read as the Python type botocore's serializers were given."""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import email.utils
import functools
import threading
from typing import Any

import botocore.session
from botocore.model import ServiceModel, Shape

_lock = threading.Lock()


@functools.cache
def _session() -> botocore.session.Session:
    return botocore.session.get_session()


def service_model(name: str) -> ServiceModel:
    with _lock:  # botocore's loader caches, but is not documented as thread-safe
        return _cached_model(name)


@functools.cache
def _cached_model(name: str) -> ServiceModel:
    return _session().get_service_model(name)


def scalar(shape: Shape, text: str) -> Any:
    """A text value (form, header, query string, XML) as the Python type botocore was given; left as
    the text when it does not parse, so the model check reports the member's type."""
    kind = shape.type_name
    try:
        if kind in ("integer", "long"):
            return int(text)
        if kind in ("float", "double"):
            return float(text)
        if kind == "boolean":
            return {"true": True, "false": False}.get(text.lower(), text)
        if kind == "timestamp":
            return _timestamp(text)
        if kind == "blob":
            return base64.b64decode(text, validate=True) if shape.serialization.get("location") is None else text
    except (ValueError, binascii.Error):
        return text
    return text


def _timestamp(text: str) -> Any:
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        pass
    try:
        return dt.datetime.fromtimestamp(float(text), dt.UTC)
    except ValueError:
        pass
    try:
        return email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return text
