"""Compute lists in pages, as Google serves them: at most `maxResults` items (default and ceiling 500)
and a `nextPageToken` while more remain; `pageToken` resumes where the last page ended.

A token is the offset of the next item and a digest of the request's filter, so a token replayed with
another filter or one the sandbox never issued is refused (400), as Google refuses it. Items come in key
order, which is stable while nothing is created in between (Google's order is stable too, but it is not
the sandbox's). `POST /_sandbox/page-size` lowers the page size for every list (Secret Manager's
`pageSize` lists too, `page`), so a client's pager is driven past its first page on a handful of resources.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from vmplane.sandbox.gcp.discovery import Method
from vmplane.sandbox.gcp.rules import bad
from vmplane.sandbox.gcp.rules.requests import MAX_RESULTS
from vmplane.sandbox.gcp.store import State


def pages(method: Method) -> bool:
    return method.api == "compute" and method.id.rsplit(".", 1)[1] in ("list", "aggregatedList")


def _token(offset: int, query: dict[str, Any]) -> str:
    digest = hashlib.sha256(str(query.get("filter", "")).encode()).hexdigest()[:12]
    return base64.urlsafe_b64encode(f"{offset}:{digest}".encode()).decode().rstrip("=")


def _offset(token: str, query: dict[str, Any]) -> int:
    try:
        text = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        offset = int(text.split(":", 1)[0])
    except ValueError:
        raise bad("pageToken", token, "The page token is invalid.") from None
    if _token(offset, query) != token:
        raise bad("pageToken", token, "The page token is invalid.")
    return offset


def page(state: State, query: dict[str, Any], items: list[Any], cap: int) -> tuple[list[Any], str | None]:
    """One page of `items` for the newer APIs' `pageSize`/`pageToken` (Secret Manager): 0 or no pageSize is
    the server's page (`cap`), a larger one is capped; the same tokens (and page-size ceiling) as compute's."""
    size = min(int(query.get("pageSize") or cap), cap)
    if state.page_size:
        size = min(size, state.page_size)
    start = _offset(query["pageToken"], query) if query.get("pageToken") else 0
    more = len(items) > start + size
    return items[start : start + size], _token(start + size, query) if more else None


def paginate(state: State, query: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    size = min(int(query.get("maxResults", MAX_RESULTS)), MAX_RESULTS)
    if state.page_size:
        size = min(size, state.page_size)
    size = size or MAX_RESULTS  # maxResults=0 is the default page, as Google's
    start = _offset(query["pageToken"], query) if query.get("pageToken") else 0
    items = answer.get("items")
    answer.pop("nextPageToken", None)
    if isinstance(items, list):
        answer["items"] = items[start : start + size]
        more = len(items) > start + size
    elif isinstance(items, dict):  # aggregated: scope -> {collection: [...]}, paged over every item
        flat = [(scope, field, item) for scope, group in items.items() for field, its in group.items() for item in its]
        out: dict[str, Any] = {}
        for scope, field, item in flat[start : start + size]:
            out.setdefault(scope, {}).setdefault(field, []).append(item)
        answer["items"] = out
        more = len(flat) > start + size
    else:
        return answer
    if more:
        answer["nextPageToken"] = _token(start + size, query)
    return answer
