"""Rewrite leaf texts of an XML API answer in place, everything else kept byte for byte (bench/cloud_sim.py).

A regex tag scanner, not a parser: AWS Query/REST answers have no CDATA or comments where this looks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

TAG = re.compile(r"<(/?)([A-Za-z_][\w.:-]*)(?:\s[^>]*?)?(/?)>")


@dataclass
class Node:
    name: str
    start: int  # just after the opening tag
    end: int = -1  # just before the closing tag
    children: list[Node] = field(default_factory=list)

    def child(self, *path: str) -> Node | None:
        node: Node | None = self
        for name in path:
            node = next((c for c in node.children if c.name == name), None) if node else None
        return node


def xml_tree(body: str) -> Node:
    root = Node("", 0, len(body))
    stack = [root]
    for m in TAG.finditer(body):
        closing, name, selfclosing = m.group(1), m.group(2), m.group(3)
        if closing:
            if len(stack) > 1:
                stack.pop().end = m.start()
        elif selfclosing:
            stack[-1].children.append(Node(name, m.end(), m.end()))
        else:
            node = Node(name, m.end())
            stack[-1].children.append(node)
            stack.append(node)
    return root


def blocks(node: Node, id_tag: str) -> list[Node]:
    """Every element that has a direct child `id_tag` (one resource in a describe answer)."""
    out = [node] if node.child(id_tag) else []
    for c in node.children:
        out.extend(blocks(c, id_tag))
    return out


class XmlEdit:
    def __init__(self, body: str) -> None:
        self.body, self.root = body, xml_tree(body)
        self.edits: list[tuple[int, int, str]] = []

    def text(self, node: Node | None) -> str:
        return self.body[node.start : node.end].strip() if node and node.end >= 0 else ""

    def items(self, id_tag: str) -> list[tuple[str, Node]]:
        return [(self.text(b.child(id_tag)), b) for b in blocks(self.root, id_tag)]

    def set(self, node: Node | None, value: str) -> None:
        if node is not None and node.end >= 0:
            self.edits.append((node.start, node.end, value))

    def result(self) -> str:
        out = self.body
        for start, end, value in sorted(self.edits, reverse=True):
            out = out[:start] + value + out[end:]
        return out
