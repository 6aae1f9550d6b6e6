"""Take secrets out of text before it is written to a log.

Two nets: patterns for the shapes secrets have (vmplane's API tokens, bearer headers, AWS keys and session
tokens, Google OAuth tokens, PEM private keys, `secret=...` pairs), and the exact values this process knows
to be secret (credential environment variables, an environment's runtime env values and files), which no
pattern can recognise.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable

MASK = "[redacted]"
MIN_SECRET = 6  # shorter known values ("info", "true") would blank ordinary words

_PATTERNS = re.compile(
    "|".join(
        (
            r"vmp_[A-Za-z0-9_\-]{8,}",  # jobs/tokens.py: TOKEN_PREFIX + token_urlsafe(32)
            r"(?P<bearer>(?i:bearer)\s+)[A-Za-z0-9._~+/=\-]{8,}",
            r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b",  # AWS access key ids
            r"ya29\.[A-Za-z0-9._\-]+",  # Google OAuth access tokens
            r"1//[A-Za-z0-9._\-]{20,}",  # Google OAuth refresh tokens
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)",
            # key=value / "key": "value" pairs whose key names a secret (aws_secret_access_key, SessionToken).
            # An exception's name is no key: "DefaultCredentialsError: Your default credentials were not found"
            # keeps its first word.
            r"(?P<key>[\w\-]*(?i:secret|password|passwd|token|private_?key|api_?key|credential)[\w\-]*"
            r"(?<!Error)(?<!Exception)(?<!Warning)[\"']?\s*[:=]\s*[\"']?)[^\s\"',;&]{4,}",
        )
    )
)
_ENV_SECRET = re.compile(r"(?i)(secret|token|password|passwd|credential|private|api_?key|access_key)")
# Variables that hold where a secret is, not the secret: a path, which an error names so the reader can fix
# it (GOOGLE_APPLICATION_CREDENTIALS, AWS_SHARED_CREDENTIALS_FILE).
_ENV_PATH = re.compile(r"(?i)(_FILE|_PATH|_DIR)$|^GOOGLE_APPLICATION_CREDENTIALS$")

MAX_KNOWN = 1000  # a long-running server meets many jobs: the oldest values go first (see `remember`)
_lock = threading.Lock()
_known: dict[str, None] = {}  # insertion-ordered: the oldest first
_pinned: set[str] = set()  # the process's own credentials: never dropped
_known_re: re.Pattern[str] | None = None


def remember(values: Iterable[str], *, pin: bool = False) -> None:
    """Add values this process now knows to be secret. A job's values are remembered again at the start
    of each of its phases (`pipeline.job_scope`), so dropping the oldest beyond MAX_KNOWN forgets only
    jobs that have not run here since."""
    global _known_re
    new = [v for v in values if len(v) >= MIN_SECRET and v not in _known and v not in _pinned]
    if not new:
        return
    with _lock:
        if pin:
            _pinned.update(new)
        else:
            _known.update(dict.fromkeys(new))
            while len(_known) > MAX_KNOWN:
                del _known[next(iter(_known))]
        # Longest first, so a secret containing another is masked whole.
        every = sorted({*_known, *_pinned}, key=len, reverse=True)
        _known_re = re.compile("|".join(re.escape(v) for v in every))


def remember_environment(environ: dict[str, str] | None = None) -> None:
    """The values of credential-like environment variables (AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
    VMPLANE_METRICS_TOKEN, GOOGLE_OAUTH_ACCESS_TOKEN, ...), but not the paths of credential files."""
    env = os.environ if environ is None else environ
    remember((v for k, v in env.items() if _ENV_SECRET.search(k) and not _ENV_PATH.search(k)), pin=True)


def redact(text: str) -> str:
    known = _known_re
    if known is not None:
        text = known.sub(MASK, text)
    return _PATTERNS.sub(_mask_match, text)


def _mask_match(m: re.Match[str]) -> str:
    # Keep the word Bearer and the key of a key=value pair: the reader sees what was removed.
    kept = m.group("bearer") or m.group("key") or ""
    return f"{kept}{MASK}"
