"""clouds/gcp/identity.py without a cloud: the policy edits keep others' bindings, etag conflicts are
re-read and retried, a new account's IAM lag is waited out to a deadline, and the account's
description always proves ownership within IAM's 256 characters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vmplane.clouds.base import Tagger
from vmplane.clouds.errors import ConflictError, DeadlineExceededError, InvalidRequestError, NotFoundError
from vmplane.clouds.gcp import identity, ownership
from vmplane.envspec.load import load_spec

from .support import make_ctx

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EMAIL = "vmp-demo-abc123@p-1.iam.gserviceaccount.com"
MEMBER = f"serviceAccount:{EMAIL}"
OTHER = "user:alice@example.com"


def policy() -> dict[str, Any]:
    return {
        "etag": "BwX1",
        "version": 1,
        "bindings": [
            {"role": "roles/logging.logWriter", "members": [OTHER]},
            {"role": "roles/owner", "members": [OTHER]},
            {"role": "roles/logging.logWriter", "members": [MEMBER], "condition": {"title": "theirs"}},
        ],
    }


def test_add_member_joins_unconditional_bindings_and_keeps_everyone_elses():
    p = policy()
    assert identity.add_member(p, MEMBER)
    by_role = {(b["role"], bool(b.get("condition"))): b["members"] for b in p["bindings"]}
    assert by_role[("roles/logging.logWriter", False)] == [OTHER, MEMBER]
    assert by_role[("roles/monitoring.metricWriter", False)] == [MEMBER]
    assert by_role[("roles/owner", False)] == [OTHER]  # never ours to touch
    assert not identity.add_member(p, MEMBER)  # a second run changes nothing (no setIamPolicy)


def test_remove_members_drops_ours_in_both_forms_and_empty_bindings_only():
    p = policy()
    identity.add_member(p, MEMBER)
    p["bindings"].append({"role": "roles/viewer", "members": [f"deleted:{MEMBER}?uid=1234567890"]})
    assert identity.remove_members(p, EMAIL)
    members = [m for b in p["bindings"] for m in b["members"]]
    assert EMAIL not in " ".join(members)
    assert sorted(b["role"] for b in p["bindings"]) == ["roles/logging.logWriter", "roles/owner"]
    assert not identity.remove_members(p, EMAIL)


class FakeProjects:
    """cloudresourcemanager.projects(): getIamPolicy/setIamPolicy with an etag check."""

    def __init__(self, conflicts: int) -> None:
        self.policy, self.conflicts, self.sets = policy(), conflicts, 0

    def getIamPolicy(self, resource: str, body: dict[str, Any]) -> Any:
        snapshot = {**self.policy, "bindings": [dict(b, members=list(b["members"])) for b in self.policy["bindings"]]}
        return type("R", (), {"execute": lambda _self: snapshot})()

    def setIamPolicy(self, resource: str, body: dict[str, Any]) -> Any:
        def run(_self: Any) -> Any:
            self.sets += 1
            if self.conflicts:
                self.conflicts -= 1
                # Someone else wrote in between: their binding lands, our etag is stale.
                self.policy["bindings"].append({"role": "roles/editor", "members": ["user:bob@example.com"]})
                raise ConflictError("etag mismatch", code="ABORTED")
            self.policy = body["policy"]
            return self.policy

        return type("R", (), {"execute": run})()


class FakeGcp:
    project = "p-1"

    def __init__(self, projects: FakeProjects) -> None:
        self.crm = type("Crm", (), {"projects": lambda _self: projects})()
        self.calls: list[str] = []

    def call(self, method: str, fn: Any) -> Any:
        self.calls.append(method)
        return fn()


def test_an_etag_conflict_is_re_read_and_retried_keeping_the_other_writers_change():
    projects = FakeProjects(conflicts=2)
    gcp = FakeGcp(projects)
    assert identity.grant(gcp, EMAIL)  # type: ignore[arg-type]
    assert projects.sets == 3
    roles = {b["role"]: b["members"] for b in projects.policy["bindings"] if not b.get("condition")}
    assert MEMBER in roles["roles/logging.logWriter"] and MEMBER in roles["roles/monitoring.metricWriter"]
    assert "user:bob@example.com" in roles["roles/editor"]  # the concurrent writer's binding survived


def test_a_policy_that_keeps_changing_fails_after_bounded_attempts():
    projects = FakeProjects(conflicts=100)
    with pytest.raises(ConflictError, match="kept changing"):
        identity.grant(FakeGcp(projects), EMAIL)  # type: ignore[arg-type]
    assert projects.sets == identity.POLICY_ATTEMPTS


def test_iam_lag_on_a_new_account_is_retried_then_given_up_at_the_deadline(monkeypatch):
    slept: list[float] = []
    answers: list[Exception | str] = [
        NotFoundError("nope"),
        InvalidRequestError("Service account x does not exist."),
        "ok",
    ]

    def flaky() -> str:
        a = answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return a

    assert identity._settling(flaky, "grant", sleep=slept.append) == "ok"
    assert len(slept) == 2
    with pytest.raises(InvalidRequestError, match="bad role"):  # other 400s are not IAM lag
        identity._settling(lambda: (_ for _ in ()).throw(InvalidRequestError("bad role")), "grant", sleep=slept.append)
    now = [0.0]
    monkeypatch.setattr(identity.time, "monotonic", lambda: now[0])

    def advance(s: float) -> None:
        now[0] += s

    with pytest.raises(DeadlineExceededError, match="did not see the service account"):
        identity._settling(lambda: (_ for _ in ()).throw(NotFoundError("x")), "grant", sleep=advance)
    assert now[0] <= identity.IAM_SETTLE


def test_the_account_description_fits_iam_and_still_proves_ownership():
    spec = load_spec(EXAMPLES / "gcp-fixed.jsonc")
    tagger = Tagger.for_spec(spec, "job-0123456789abcdef")
    short = identity.sa_description(tagger)
    assert ownership.tags_of({"description": short}) == tagger.tags("service-account")  # the full set fits
    crowded = Tagger(
        prefix="zop:", org="acme", job_id=tagger.job_id, env=spec.name, extra={f"k{i}": "v" * 40 for i in range(10)}
    )
    text = identity.sa_description(crowded)
    assert len(text) <= identity.SA_DESCRIPTION_MAX
    assert ownership.owned_by({"description": text}, crowded)
    assert not ownership.owned_by({"description": text}, Tagger.for_spec(spec, "job-other"))


def test_ensure_identity_refuses_an_account_that_is_someone_elses(monkeypatch):
    spec = load_spec(EXAMPLES / "gcp-fixed.jsonc")
    ctx = make_ctx(spec)
    foreign = {
        "email": EMAIL,
        "description": ownership.description(Tagger.for_spec(spec, "job-other"), "service-account"),
    }
    monkeypatch.setattr(identity, "get_account", lambda gcp, email: foreign)
    granted: list[str] = []
    monkeypatch.setattr(identity, "grant", lambda gcp, email: granted.append(email))
    with pytest.raises(ConflictError, match="belongs to org acme, job job-other"):
        identity.ensure_identity(FakeGcp(FakeProjects(0)), ctx)  # type: ignore[arg-type]
    assert granted == []  # no role reaches someone else's account
