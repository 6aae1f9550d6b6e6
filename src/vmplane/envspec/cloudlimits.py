"""What each cloud would refuse in a valid-looking file, refused by `vmplane validate` instead: the shared part.

The models check shapes; these checks need the cloud and what vmplane adds to the file on its way to
the API: its own tags (five `<tagPrefix>` keys and `Name`), the names it derives, the label and token
folding (`tagforms`). Each rule names the cloud's answer and its source, so a message says what the
cloud would have said, at the file's line, before anything was created. The rules themselves live with
each cloud (`clouds/<cloud>/spec.py`, run as its `CloudSpec.checks`); this module holds what they share.
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic_core import InitErrorDetails

from vmplane.envspec.cloudspec import spec_error

if TYPE_CHECKING:
    from vmplane.envspec.models import EnvSpec

# The tag keys vmplane adds to every resource after `tagPrefix` (clouds/base.Tagger.tags), and `Name`.
VMPLANE_TAG_NAMES = ("orgId", "jobId", "role", "managedBy", "env")
_SAMPLE_JOB = "job-20260101-0a1b2c3d"  # jobs/service.new_job_id's shape: the value only matters for folding
# botocore's ELBv2/ACM/IAM TagKey and TagValue pattern `[\p{L}\p{Z}\p{N}_.:/=+\-@]*`: EC2 alone allows
# any character, but the same tag set goes on load balancers, certificates and IAM roles.
_AWS_TAG_PUNCT = frozenset("_.:/=+-@")
_REGION_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


@dataclass(frozen=True)
class Rule:
    """One refusal: who answers (the service), what it answers (its error code), where that is documented."""

    who: str
    answer: str
    source: str


def refusal(loc: tuple[str | int, ...], value: Any, message: str, rule: Rule) -> InitErrorDetails:
    return spec_error(loc, value, f"{message}; {rule.who} answers {rule.answer}", kind="cloud_refuses")


def vmplane_tag_keys(spec: EnvSpec) -> set[str]:
    return {f"{spec.tag_prefix}{name}" for name in VMPLANE_TAG_NAMES} | {"Name"}


def logical_tags(spec: EnvSpec) -> dict[str, str]:
    """The tag set a resource gets (Tagger.tags): the user's, then vmplane's over them."""
    p = spec.tag_prefix
    own = {f"{p}orgId": spec.org, f"{p}jobId": _SAMPLE_JOB, f"{p}role": "vm", f"{p}managedBy": "vmplane"}
    return {**spec.tags, **own, f"{p}env": spec.name}


def aws_tag_text_ok(text: str) -> bool:
    """AWS's tag pattern: letters, separators (spaces) and numbers of any script, and `_.:/=+-@`."""
    return all(unicodedata.category(c)[0] in "LZN" or c in _AWS_TAG_PUNCT for c in text)


def ip_like(name: str) -> bool:
    try:
        ipaddress.IPv4Address(name)
    except ValueError:
        return False
    return True


def region_like(region: str) -> bool:
    """A region name's shape (us-east-1, us-central1), as a starter's argument is checked."""
    return _REGION_RE.fullmatch(region) is not None


def bucket(spec: EnvSpec, why: Callable[[str], str | None], rule: Rule) -> list[InitErrorDetails]:
    """The state bucket refused when `why` finds a reason in its name."""
    if spec.state is None or (reason := why(spec.state.bucket)) is None:
        return []
    return [refusal(("state", "bucket"), spec.state.bucket, f"a bucket name with {reason}", rule)]
