"""clouds/transport.py: one call's attempts counted, errors translated, transient ones retried to the
deadline (and "in use" not), and the fault hook only through faults.sandbox_hook."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from vmplane.clouds import faults, waits
from vmplane.clouds.base import API_CALLS
from vmplane.clouds.errors import (
    CloudError,
    DeadlineExceededError,
    DependencyViolationError,
    NotFoundError,
    TransientError,
)
from vmplane.clouds.transport import Transport


class Boom(Exception):
    """What an SDK raises; `kind` is the CloudError the translator makes of it."""

    def __init__(self, kind: type[CloudError]) -> None:
        super().__init__(kind.__name__)
        self.kind = kind


def _translate(e: Exception, name: str) -> CloudError:
    assert isinstance(e, Boom)
    return e.kind(str(e), code="X", operation=name)


def transport(sandbox: bool = True, asked: list[int] | None = None, **kw: Any) -> Transport:
    def is_sandbox() -> bool:
        (asked if asked is not None else []).append(1)
        return sandbox

    return Transport("toy", translate=_translate, endpoint=lambda _: "https://toy", is_sandbox=is_sandbox, **kw)


def script(*answers: Any) -> Any:
    todo = list(answers)

    def fn() -> Any:
        a = todo.pop(0)
        if isinstance(a, type) and issubclass(a, CloudError):
            raise Boom(a)
        return a

    return fn


@pytest.fixture
def tally(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(waits.random, "uniform", lambda a, b: 0.0)  # no backoff sleeps
    counter: Counter[str] = Counter()
    token = API_CALLS.set(counter)
    yield counter
    API_CALLS.reset(token)


def test_a_transient_error_is_retried_and_each_attempt_counted(tally: Counter[str]) -> None:
    assert transport().call("toy.get", script(TransientError, TransientError, "ok")) == "ok"
    assert tally == Counter({"toy.get": 3})


@pytest.mark.parametrize("kind", [DependencyViolationError, NotFoundError])
def test_in_use_and_refusals_are_raised_at_once_translated(tally: Counter[str], kind: type[CloudError]) -> None:
    with pytest.raises(kind) as err:
        transport().call("toy.delete", script(kind, "never"))
    assert type(err.value) is kind and isinstance(err.value.__cause__, Boom)
    assert tally == Counter({"toy.delete": 1})


def test_retries_stop_at_the_deadline(tally: Counter[str]) -> None:
    t = transport(deadline=0.0)
    with pytest.raises(DeadlineExceededError, match=r"gave up on toy.get after 0s: toy.get: TransientError \[X\]"):
        t.call("toy.get", script(TransientError, "never"))
    assert tally == Counter({"toy.get": 1})


def arm(monkeypatch: pytest.MonkeyPatch, value: str) -> list[str]:
    """The hook's variable set to `value`; each pause the hook would make recorded instead of slept."""
    monkeypatch.setenv(faults.FAULT_PAUSE_ENV, value)
    monkeypatch.setattr(faults, "_pause", None)
    paused: list[str] = []
    monkeypatch.setattr(faults.FaultPause, "after", lambda self, name: paused.append(name))
    return paused


@pytest.fixture
def armed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    return arm(monkeypatch, "toy.insert#99")  # a count no test reaches: only the recorded pauses matter


def test_the_hook_acts_after_a_success_on_a_sandbox_only(tally: Counter[str], armed: list[str]) -> None:
    t = transport(hooked=lambda name: name != "toy.get")
    t.call("toy.get", script("a"))
    t.call("toy.insert", script("b"))
    with pytest.raises(NotFoundError):
        t.call("toy.insert", script(NotFoundError))
    assert armed == ["toy.insert"]  # not after a read the target excludes, nor after a failure

    transport(sandbox=False).call("toy.insert", script("c"))
    assert armed == ["toy.insert"]


def test_the_target_is_asked_once_and_only_when_the_hook_is_wanted(
    tally: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(faults.FAULT_PAUSE_ENV, raising=False)
    asked: list[int] = []
    t = transport(asked=asked)
    t.call("toy.insert", script("a"))
    assert t.hook() is None and asked == []

    monkeypatch.setenv(faults.FAULT_PAUSE_ENV, "toy.insert#99")
    monkeypatch.setattr(faults, "_pause", None)
    t = transport(asked=asked)
    assert t.hook() is not None and t.hook() is not None
    assert asked == [1]
