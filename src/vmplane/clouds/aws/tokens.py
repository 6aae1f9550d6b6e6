"""Idempotency tokens: one helper for every token the AWS driver sends.

AWS answers a repeated token with the first request's result (RunInstances hands back the instance it
launched, even terminated; a different request with the same token is `IdempotentParameterMismatch`).
So a token must be the same on a resumed step and distinct for every distinct request, and it must fit
the API's limit: a cut would merge two long names into one token. Parts that fit are sent joined (the
tokens vmplane always sent); longer ones keep a readable head and a digest of the whole.
"""

from __future__ import annotations

import hashlib
import re

# Limits from botocore's service documents (the members carry no `max`, the text states it).
RUN_INSTANCES_LIMIT = 64  # "Constraints: Maximum 64 ASCII characters"
LAUNCH_TEMPLATE_LIMIT = 128  # "Constraint: Maximum 128 ASCII characters."
NAT_GATEWAY_LIMIT = 64  # "Constraint: Maximum 64 ASCII characters."
_DIGEST = 8  # hex characters of sha1: the layout RunInstances tokens always had, so resumed jobs match
_ASCII = re.compile(r"[\x21-\x7e]+")


def idempotency_token(*parts: str, limit: int = 64, sep: str = "-") -> str:
    """`parts` joined by `sep` when that fits `limit`, else its head and a digest of the whole."""
    whole = sep.join(p for p in parts if p)
    if not _ASCII.fullmatch(whole):
        raise ValueError(f"an idempotency token is printable ASCII: {whole!r}")
    if len(whole) <= limit:
        return whole
    digest = hashlib.sha1(whole.encode()).hexdigest()[:_DIGEST]
    return f"{whole[: limit - _DIGEST - len(sep)]}{sep}{digest}"


def run_instances_token(job_id: str, name: str, suffix: str = "") -> str:
    """One launch of VM `name`; `suffix` tells a relaunch (after a termination, a rotation) apart.
    Joined without a separator before the suffix, as before, so a resumed launch sends its old token."""
    return idempotency_token(f"{job_id}-{name}{suffix}", limit=RUN_INSTANCES_LIMIT)


def rotation_suffix(version: int, template_attempt: int) -> str:
    """A rotation's launch, to template version `version`. A template made again after a deletion counts
    its versions from 1 again, so its attempt is part of the suffix (attempt 0: the suffix always sent)."""
    return f"v{version}" if not template_attempt else f"v{version}-lt{template_attempt}"


def launch_template_token(job_id: str, pool: str, attempt: int = 0) -> str:
    """Attempt 0 is the token vmplane always sent; a template deleted out of band is made again under
    the next attempt (the old token would answer with the deleted template)."""
    return idempotency_token(job_id, "lt", pool, f"retry{attempt}" if attempt else "", limit=LAUNCH_TEMPLATE_LIMIT)


def nat_gateway_token(job_id: str, attempt: int) -> str:
    """Attempt 0 is the token vmplane always sent; a gateway that failed is followed by a new attempt,
    since the old token would only hand back the failed gateway."""
    return idempotency_token(job_id, "nat-0", f"retry{attempt}" if attempt else "", limit=NAT_GATEWAY_LIMIT)
