"""The privileges the README tells an operator to give vmplane's token, read from the README itself (the
list under **The privileges vmplane's token needs**), and granted on a fake the way its set-up steps do:
a role on `/` for the token's user, the token sharing its user's privileges (`--privsep 0`). Until the
first grant fakepve allows everything; after it, every call is checked as PVE's schema states."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from tests.proxmox.fakecluster import TOKEN_USER, Serving

README = Path(__file__).resolve().parents[2] / "README.md"
HEADING = "**The privileges vmplane's token needs**"
NAME = re.compile(r"`((?:VM|Datastore|Pool|SDN|Sys)\.[A-Za-z.]+)`")


def readme_privileges() -> list[str]:
    """The names in the README's list (its bullets, up to the blank line that ends them)."""
    text = README.read_text()
    start = text.index("\n- ", text.index(HEADING))
    return sorted(set(NAME.findall(text[start : text.index("\n\n", start)])))


def grant_readme_privileges(serving: Serving, *, without: Iterable[str] = ()) -> list[str]:
    """`pveum acl modify / --roles <role> --users vmplane@pve` with the README's role (less `without`)."""
    held = sorted(set(readme_privileges()) - set(without))
    serving.run(serving.pve.grant, TOKEN_USER, "/", *held)
    return held
