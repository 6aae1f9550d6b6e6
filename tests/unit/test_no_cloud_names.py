"""Outside a cloud's packages no code names a cloud (issue 27): every per-cloud fact is in its descriptor
(clouds/<cloud>/descriptor.py) and clouds/registry.py is the one list. An AST scan of src/vmplane outside
clouds/, sandbox/ and tf/ fails on any `Cloud.<member>`, any comparison (or `case`) with a cloud's name, and
any dict literal keyed by either; each hit is printed as file:line."""

from __future__ import annotations

import ast
from pathlib import Path

from vmplane.envspec.base import Cloud

SRC = Path(__file__).resolve().parents[2] / "src" / "vmplane"
# Where naming a cloud is the point: the drivers and the registry, the emulators, the Terraform stacks.
EXEMPT = ("clouds/", "sandbox/", "tf/")
# Shipped to the VM as text and run there with the standard library alone: it cannot ask the registry, so it
# reads the cloud from the plan the control plane wrote (the plan's source names it).
VM_SIDE = {"bootstrap/guest_secrets_main.py"}
NAMES = frozenset(c.value for c in Cloud)
MEMBERS = frozenset(Cloud.__members__)

# Files other helpers of issue 27 are moving their cloud knowledge out of, in parallel; each still hits at
# this branch's last commit. The integrator empties this set as their branches land.
PENDING: set[str] = set()  # files still to clear; empty: nothing outside the clouds names one


def _cloud_name(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in NAMES


def _cloud_member(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr in MEMBERS
        and isinstance(node.value, ast.Name)
        and node.value.id == "Cloud"
    )


def hits(source: str, filename: str = "<snippet>") -> list[str]:
    """Each place in `source` naming a cloud, as `filename:line: what`."""
    out: list[str] = []
    for node in ast.walk(ast.parse(source, filename)):
        line = getattr(node, "lineno", 0)
        if _cloud_member(node):
            assert isinstance(node, ast.Attribute)
            out.append(f"{filename}:{line}: Cloud.{node.attr}")
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            # `x in ("aws", "gcp")` names them inside a tuple, list or set.
            flat = [e for s in sides for e in (s.elts if isinstance(s, ast.Tuple | ast.List | ast.Set) else [s])]
            named = [e.value for e in flat if _cloud_name(e) and isinstance(e, ast.Constant)]
            if named:
                out.append(f"{filename}:{line}: compares with {', '.join(map(repr, named))}")
        elif isinstance(node, ast.MatchValue) and _cloud_name(node.value):
            out.append(f"{filename}:{line}: matches {getattr(node.value, 'value', '')!r}")
        elif isinstance(node, ast.Dict):
            keys = [k for k in node.keys if k is not None and (_cloud_name(k) or _cloud_member(k))]
            if keys:
                out.append(f"{filename}:{line}: a table keyed by cloud ({len(keys)} keys)")
    return out


def _scanned() -> dict[str, str]:
    files = {p.relative_to(SRC).as_posix(): p for p in sorted(SRC.rglob("*.py"))}
    return {rel: p.read_text() for rel, p in files.items() if not rel.startswith(EXEMPT)}


def test_no_code_outside_the_clouds_names_a_cloud() -> None:
    found = [h for rel, text in _scanned().items() if rel not in PENDING | VM_SIDE for h in hits(text, rel)]
    assert not found, "cloud names outside clouds/, sandbox/ and tf/ (put them in the descriptor):\n" + "\n".join(found)


def test_every_pending_file_still_names_a_cloud() -> None:
    # A file that no longer hits leaves the allowlist, so the list cannot hide a new hit later.
    scanned = _scanned()
    clean = sorted(rel for rel in PENDING if rel not in scanned or not hits(scanned[rel], rel))
    assert not clean, f"no longer naming a cloud, remove from PENDING: {clean}"


def test_the_scanner_finds_each_kind_of_hit() -> None:
    snippet = (
        "a = Cloud.gcp\n"
        "if cloud is Cloud.proxmox: pass\n"
        "b = provider.cloud.value == 'aws'\n"
        "c = name in ('azure', 'other')\n"
        "d = {'gcp': 1, 'x': 2}\n"
        "e = {Cloud.aws: 1}\n"
        "match cloud:\n    case 'proxmox':\n        pass\n"
    )
    found = hits(snippet)
    assert "<snippet>:1: Cloud.gcp" in found and "<snippet>:2: Cloud.proxmox" in found
    assert "<snippet>:3: compares with 'aws'" in found
    assert "<snippet>:4: compares with 'azure'" in found
    assert "<snippet>:5: a table keyed by cloud (1 keys)" in found
    assert {"<snippet>:6: Cloud.aws", "<snippet>:6: a table keyed by cloud (1 keys)"} <= set(found)
    assert "<snippet>:8: matches 'proxmox'" in found


def test_the_scanner_passes_neutral_code() -> None:
    snippet = (
        "d = descriptor_for(spec.provider.cloud)\n"
        "x = Cloud(name)\n"
        "ok = kind == 'nat'\n"
        "t = {'aws_like': 1, key: 2, **rest}\n"
        "s = 'aws'  # a string that is not compared is a message, not a branch\n"
    )
    assert hits(snippet) == []
