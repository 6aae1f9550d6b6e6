"""Sign-in sessions and CSRF tokens of the dashboard.

The cookie `vmplane_session` holds a random session id and nothing else; the API token it stands for
stays in this process's memory (`Sessions`). Why not the token sealed into the cookie: a sealed token
still leaves the server, on every request, and stays valid after sign-out for as long as the token does
(a cookie cannot be recalled); a server-side entry is dropped at sign-out, so a copied cookie dies with
it. The cost is that a restart of `vmplane serve` signs everyone out, which a dashboard can afford, and
that several `serve` processes behind one load balancer need sticky sessions for it.
The token is still verified through `jobs.tokens.verify` on every request, so a revocation takes
effect at once.

CSRF: each session has its own random token, sent in every form's hidden `csrf` input (and by htmx in
the `X-CSRF-Token` header); before sign-in, a double-submit cookie (`vmplane_signin`) plays that role.
Both cookies are HttpOnly and SameSite=Strict, Secure when the request came over https.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from dataclasses import dataclass, field

from starlette.requests import Request
from starlette.responses import Response

COOKIE = "vmplane_session"
SIGNIN_COOKIE = "vmplane_signin"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
IDLE_SECONDS = 8 * 3600  # a session unused this long is forgotten
MAX_SESSIONS = 10_000  # memory bound: the oldest sessions go first


@dataclass
class Session:
    token: str  # the API token; never rendered, logged or sent back
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    last_used: float = field(default_factory=lambda: time.monotonic())  # looked up per session, not at import


class Sessions:
    """This server's sign-in sessions, by the random id their cookie carries."""

    def __init__(self) -> None:
        self._by_id: dict[str, Session] = {}
        self._lock = threading.Lock()

    def create(self, token: str) -> tuple[str, Session]:
        sid = secrets.token_urlsafe(32)
        with self._lock:
            self._expire()
            if len(self._by_id) >= MAX_SESSIONS:
                oldest = min(self._by_id, key=lambda k: self._by_id[k].last_used)
                del self._by_id[oldest]
            session = self._by_id[sid] = Session(token)
        return sid, session

    def get(self, sid: str | None) -> Session | None:
        if not sid:
            return None
        with self._lock:
            session = self._by_id.get(sid)
            if session is None:
                return None
            now = time.monotonic()
            if now - session.last_used > IDLE_SECONDS:
                del self._by_id[sid]
                return None
            session.last_used = now
            return session

    def drop(self, sid: str | None) -> None:
        with self._lock:
            self._by_id.pop(sid or "", None)

    def _expire(self) -> None:
        now = time.monotonic()
        for sid in [k for k, s in self._by_id.items() if now - s.last_used > IDLE_SECONDS]:
            del self._by_id[sid]


def same(presented: str | None, expected: str) -> bool:
    """Constant-time comparison of a presented CSRF token with the expected one."""
    return bool(presented) and hmac.compare_digest(str(presented).encode(), expected.encode())


def set_cookie(response: Response, request: Request, name: str, value: str, max_age: int | None = None) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path="/",  # `/` itself redirects by sign-in state, so the cookie must reach it too
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def clear_cookie(response: Response, request: Request, name: str) -> None:
    response.delete_cookie(name, path="/", httponly=True, samesite="strict", secure=request.url.scheme == "https")
