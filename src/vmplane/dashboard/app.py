"""The server `vmplane serve` runs: the JSON API (unchanged, and alone in its OpenAPI document) plus the
dashboard's pages at `/` and `/ui/*` and its vendored assets at `/ui/static`."""

from __future__ import annotations

import contextlib
from typing import Any

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from vmplane.api.app import create_app
from vmplane.dashboard import actions, drift, events, pages, wizard
from vmplane.dashboard.common import HERE, Dashboard, PageError, SignInRequired
from vmplane.settings import Settings

# Everything from this origin only; no inline script or style, no framing, no referrer leaving the page.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-content-type-options", b"nosniff"),
]


class SecurityHeaders:
    """Adds the headers above to the dashboard's answers (`/` and `/ui/*`); the API's stay as they were.
    Plain ASGI rather than BaseHTTPMiddleware, so server-sent events stream through unbuffered."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not (path == "/" or path == "/ui" or path.startswith("/ui/")):
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", []), *SECURITY_HEADERS]
                if not path.startswith("/ui/static/") and all(k.lower() != b"cache-control" for k, _ in headers):
                    headers.append((b"cache-control", b"no-store"))  # pages show one caller's data
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)


def create_server(settings: Settings, *, run_workflows: bool = True) -> FastAPI:
    """The API of `api.app.create_app` with the dashboard mounted beside it."""
    app = create_app(settings, run_workflows=run_workflows)
    dash = Dashboard(settings, run_workflows=run_workflows)
    for module in (pages, actions, drift, wizard, events):
        app.include_router(module.router(dash))
    app.mount("/ui/static", StaticFiles(directory=HERE / "static"), name="ui-static")
    app.include_router(pages.not_found_router(dash))
    app.add_middleware(SecurityHeaders)

    async def sign_in_required(request: Request, _: Any) -> Response:
        return RedirectResponse("/ui/sign-in", status_code=303)

    async def page_error(request: Request, exc: Any) -> Response:
        assert isinstance(exc, PageError)
        return await run_in_threadpool(error_page, request, exc)

    def error_page(request: Request, exc: PageError) -> Response:
        who = None
        with contextlib.suppress(SignInRequired):  # the error page shows the nav of a signed-in caller
            who = dash.who(request)
        return dash.render(request, "error.html", who, exc.status, message=exc.message, status=exc.status)

    app.add_exception_handler(SignInRequired, sign_in_required)
    app.add_exception_handler(PageError, page_error)
    return app
