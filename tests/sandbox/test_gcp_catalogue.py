"""The GCP fidelity catalogue (sandbox/gcp/rules/), each rule driven through the sandbox's HTTP front door.

Every rule's example sets up what it needs (each step must succeed), then sends the request Google
refuses or answers in its own way: `400 invalid`/`412 conditionNotMet` as the HTTP answer, `op CODE` as a
200 whose RUNNING operation ends DONE with that error, `page` as a first page with a nextPageToken.
Against the old sandbox each example fails: what it answered instead is the rule's `old`, shown in
the test id's failure message.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import Sandbox

from vmplane.sandbox.gcp import rules

RULES = rules.load()
README = Path(__file__).resolve().parents[2] / "README.md"


def _send(sandbox: Sandbox, http: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"{sandbox.gcp_endpoint}{path}", data=data, method=http)
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def _operation(sandbox: Sandbox, op: dict[str, Any]) -> dict[str, Any]:
    path = "/compute/v1/" + op["selfLink"].split("/compute/v1/", 1)[1]
    status, done = _send(sandbox, "GET", path)
    assert status == 200 and done["status"] == "DONE", done
    return done


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_rule_answers_as_google(sandbox: Sandbox, rule: rules.Rule) -> None:
    """Each rule's example, through the sandbox; the old sandbox answered `rule.old` instead."""
    project = f"t-{uuid.uuid4().hex[:12]}"
    *setup, last = [(s.http, s.path.format(p=project), s.body) for s in rule.example]
    for http, path, body in setup:
        status, answer = _send(sandbox, http, path, body)
        assert status == 200, f"setup {http} {path}: {answer}"
        if answer.get("kind") == "compute#operation":
            assert not _operation(sandbox, answer).get("error"), f"setup {http} {path} failed"
    status, answer = _send(sandbox, *last)
    old = f"the old sandbox answered {rule.old}"
    kind, _, code = rule.answer.partition(" ")
    if kind == "op":
        assert status == 200 and answer["status"] == "RUNNING", f"{old}; now {status} {answer}"
        errors = _operation(sandbox, answer)["error"]["errors"]
        assert errors[0]["code"] == code, f"{old}; now {errors}"
        if code == "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE":
            assert "is already being used by 'projects/" in errors[0]["message"]
            target = "/compute/v1/" + answer["targetLink"].split("/compute/v1/", 1)[1]
            assert _send(sandbox, "GET", target)[0] == 200  # not deleted
    elif kind == "page":
        assert status == 200 and answer.get("nextPageToken"), f"{old}; now {status} {answer}"
        http, path, _ = last
        sep = "&" if "?" in path else "?"
        status, rest = _send(sandbox, http, f"{path}{sep}pageToken={answer['nextPageToken']}")
        assert status == 200 and rest["items"] and rest["items"] != answer["items"], rest
    else:
        assert status == int(kind), f"{old}; now {status} {answer}"
        assert answer["error"]["errors"][0]["reason"] == code, answer


def test_every_rule_has_a_source_and_a_unique_id() -> None:
    assert len(RULES) >= 60
    assert len({r.id for r in RULES}) == len(RULES)
    for r in RULES:
        assert r.source.startswith(("https://cloud.google.com/", "https://github.com/")), r.id
        assert r.example and r.summary and r.old, r.id


def test_readme_lists_the_catalogue() -> None:
    text = README.read_text()
    heading = "### Google Cloud fidelity rules\n"
    assert heading in text
    section = text.split(heading, 1)[1]
    assert rules.table() in section.split("\n### ", 1)[0], "regenerate: python -m vmplane.sandbox.gcp.rules"
