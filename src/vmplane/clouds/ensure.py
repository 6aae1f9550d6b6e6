"""The one way a step makes a resource: find -> save the intent -> create -> save.

`get` reads the record (done if it holds one), `find` looks in the cloud (by tag or by the name the
driver derives from the job), `intent` records what is about to be made (so a crash between the create
and the save leaves a record that a re-run's `find` reconciles, never an orphan), `create` makes it and
returns its id, `put` records the id. Each is the driver's; the order and the saves are here.
"""

from __future__ import annotations

from collections.abc import Callable

from vmplane.clouds.base import Context


def ensure(
    ctx: Context,
    what: str,
    *,
    get: Callable[[], str | None],
    find: Callable[[], str | None],
    create: Callable[[], str],
    put: Callable[[str], None],
    intent: Callable[[], None] | None = None,
) -> str:
    """The resource's id: recorded, found, or created (and recorded)."""
    recorded = get()
    if recorded:
        return recorded
    found = find()
    if found is None:
        if intent is not None:
            intent()
            ctx.save()
        found = create()
        ctx.log(f"{what} {found} created")
    put(found)
    ctx.save()
    return found
