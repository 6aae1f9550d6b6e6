"""What of a job remains in the project, and the helpers that find it: a resource is listed by the
environment's name prefix (`named_like`) and kept when its description (or, for labelled kinds, its
labels) carries this job's id (`is_ours`). The kinds are the resource table's (resources.py).

stepUnregisterSpace fails while `leftovers` is not empty, so a teardown that missed something says what.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from vmplane.clouds.base import Context, Leftover, Tagger
from vmplane.clouds.gcp import naming, ownership
from vmplane.clouds.gcp.network import region_zones
from vmplane.clouds.gcp.session import CALL_TIMEOUT, GcpClients
from vmplane.clouds.tags import gcp_labels


def is_ours(resource: Any, tagger: Tagger) -> bool:
    """The job id in the description (every kind) or in the labels (kinds that take labels)."""
    if ownership.owned_by(resource, tagger):
        return True
    want = gcp_labels({tagger.job_key: tagger.job_id})
    labels = dict(getattr(resource, "labels", None) or {})
    return bool(labels) and all(labels.get(k) == v for k, v in want.items())


def named_like(gcp: GcpClients, ctx: Context, client: str, collection: str, scope: str) -> Iterator[Any]:
    """Every resource of one collection whose name starts with the environment's prefix."""
    api = gcp.compute(client)
    flt = f"name eq {re.escape(naming.prefix(ctx.spec))}.*"
    region = ctx.spec.provider.region
    scopes: list[dict[str, str]] = [{}]
    if scope == "region":
        scopes = [{"region": region}]
    elif scope == "zone":
        zones = ctx.infra.Zones or region_zones(gcp, region)
        scopes = [{"zone": z} for z in zones]
    for where in scopes:
        # The pager fetches further pages lazily: list() inside the call counts and retries them with it.
        pages: Callable[[], Any] = partial(
            api.list, request={"project": gcp.project, "filter": flt, **where}, timeout=CALL_TIMEOUT
        )
        found: list[Any] = gcp.call(f"compute.{collection}.list", partial(_all, pages))
        yield from found


def _all(pages: Callable[[], Any]) -> list[Any]:
    return list(pages())


def leftovers(gcp: GcpClients, ctx: Context) -> list[Leftover]:
    """What a clean teardown leaves none of: every observable kind of the resource table."""
    from vmplane.clouds.gcp import secret_iam
    from vmplane.clouds.gcp.resources import TABLE  # the table's observers use the helpers above

    # A binding on a user's secret is no resource of the table (nothing to observe for drift): checked here.
    return TABLE.leftovers(gcp, ctx) + secret_iam.leftovers(gcp, ctx)
