"""Server-sent events for a job page: the live parts of the page, re-rendered when the job's version
changes, until the job is no longer active.

The stream polls the job row (it is the record every writer commits to, whichever process runs the
workflow), re-verifies the token on each poll (a revocation ends the stream), stops when the client goes
away, and lives at most `LIFETIME` seconds: the browser's EventSource then reconnects by itself, so no
connection is held forever. When the job ends, an `end` event tells the page to stop listening.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from vmplane.dashboard.common import Dashboard, SignInRequired, Who
from vmplane.dashboard.views import ACTION_TITLES, job_page
from vmplane.jobs.service import ACTIVE, JobView

POLL_SECONDS = 0.5
LIFETIME = 300.0
# The page's live regions, each rendered by its own template and replaced by id (static/app.js).
LIVE = {
    "job-status": "_status.html",
    "job-error": "_error.html",
    "steps-section": "_steps.html",
    "infra": "_infra.html",
    "history": "_history.html",
    "actions": "_actions.html",
    "cost": "_cost.html",
    "runtime": "_runtime.html",
    "drift": "_drift.html",  # unread again: a read made before the job ran again is stale
}


def live_fragments(dash: Dashboard, who: Who, job: JobView) -> dict[str, str]:
    page = job_page(job, who.role)
    ctx = {"who": who, "csrf": who.csrf, "page": page, "titles": ACTION_TITLES}
    return {key: dash.templates.get_template(name).render(ctx) for key, name in LIVE.items()}


def sse(event: str, data: object) -> str:
    # One `data:` line: the JSON encoding has no raw newline.
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


def router(dash: Dashboard) -> APIRouter:
    r = APIRouter(include_in_schema=False)

    @r.get("/ui/jobs/{job_id}/events")
    async def events(request: Request, job_id: str) -> Response:
        who = await asyncio.to_thread(dash.who, request)
        first = await asyncio.to_thread(dash.load, job_id, who)  # a 404 page before any stream starts

        async def stream() -> AsyncIterator[str]:
            deadline = time.monotonic() + LIFETIME
            job, last = first, -1
            yield "retry: 2000\n\n"
            while True:
                if job.version != last:
                    last = job.version
                    yield sse(
                        "job",
                        {"status": job.status.value, "version": job.version, "html": live_fragments(dash, who, job)},
                    )
                if job.status not in ACTIVE:
                    yield sse("end", {"status": job.status.value})
                    return
                if time.monotonic() > deadline or await request.is_disconnected():
                    return
                await asyncio.sleep(POLL_SECONDS)
                try:
                    current = await asyncio.to_thread(dash.who, request)
                    job = await asyncio.to_thread(dash.load, job_id, current)
                except SignInRequired:
                    yield sse("end", {"status": "signed-out"})
                    return

        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)

    return r
