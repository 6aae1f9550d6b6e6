"""clouds/waits.py: adaptive polling and retries against a fake clock (no real sleeping)."""

from __future__ import annotations

import pytest

from vmplane.clouds import waits
from vmplane.clouds.errors import (
    ConflictError,
    DeadlineExceededError,
    DependencyViolationError,
    InvalidRequestError,
    NotFoundError,
    TransientError,
)

from .faults import FakeClock


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(waits, "time", fake)
    return fake


def answers(*values):
    """A check/call that returns (or raises) the given values in order, counting its calls."""
    it = iter(values)

    def fn():
        fn.calls += 1
        value = next(it)
        if isinstance(value, BaseException):
            raise value
        return value

    fn.calls = 0
    return fn


# ---- poll -----------------------------------------------------------------------------------------


def test_poll_returns_first_non_none_without_sleeping_when_ready(clock):
    check = answers("ready")
    assert waits.poll(check, what="x", timeout=10, sleep=clock.sleep) == "ready"
    assert check.calls == 1
    assert clock.sleeps == []


def test_poll_returns_first_non_none_value_even_if_falsy(clock):
    check = answers(None, None, 0, "later")
    assert waits.poll(check, what="x", timeout=10, sleep=clock.sleep) == 0
    assert check.calls == 3


def test_poll_without_late_backs_off_geometrically_and_caps_the_delay(clock):
    check = answers(None, None, None, None, None, None, "done")
    result = waits.poll(check, what="x", timeout=1000, first=0.5, factor=2.0, cap=3.0, late=None, sleep=clock.sleep)
    assert result == "done"
    assert clock.sleeps == [0.5, 1.0, 2.0, 3.0, 3.0, 3.0]


def test_poll_default_backoff_grows_from_50ms_and_caps_at_5s(clock):
    check = answers(*([None] * 120), True)
    waits.poll(check, what="x", timeout=10_000, sleep=clock.sleep)
    assert clock.sleeps[0] == pytest.approx(0.05)
    assert all(b >= a for a, b in zip(clock.sleeps, clock.sleeps[1:], strict=False))
    assert max(clock.sleeps) == 5.0
    assert clock.sleeps[-3:] == [5.0, 5.0, 5.0]


def ready_after(clock: FakeClock, seconds: float):
    """A check that answers once `seconds` of fake time have passed since its first call."""
    start: list[float] = []

    def fn():
        start.append(clock.now) if not start else None
        fn.calls += 1
        return True if clock.now - start[0] >= seconds else None

    fn.calls = 0
    return fn


def test_the_seed_nat_wait_saw_a_20s_gateway_at_28s(clock):
    """The issue's 30.7 s for a 20 s NAT: network.py polled with first=0.1 and cap=10, plain backoff,
    so the check before 20 s was at 18.16 s and the next one at 28.16 s (plus the calls' latency)."""
    start = clock.now
    waits.poll(ready_after(clock, 20), what="nat", timeout=600, first=0.1, cap=10, late=None, sleep=clock.sleep)
    assert clock.now - start == pytest.approx(28.159, abs=0.01)


@pytest.mark.parametrize("ready", [0.3, 2.0, 8.0, 20.0, 30.0, 25.0, 75.0, 180.0, 600.0])
def test_poll_sees_a_resource_at_most_a_tenth_of_its_wait_late_and_never_more_than_the_cap(clock, ready):
    start = clock.now
    check = ready_after(clock, ready)
    waits.poll(check, what="x", timeout=3600, first=0.1, sleep=clock.sleep)
    overshoot = clock.now - start - ready
    assert 0 <= overshoot <= max(0.1, min(0.1 * ready, 5.0)) + 1e-9
    # ...without polling like mad: ~10 checks in the first second, one per 10 % more wait up to 50 s
    # (ln 50 / ln 1.1 = 41), then one per cap.
    assert check.calls <= 11 + 42 * (ready > 1) + max(0.0, ready - 50) / 5


def test_poll_sleeps_are_held_to_late_times_the_time_waited(clock):
    start = clock.now
    waits.poll(
        ready_after(clock, 100), what="x", timeout=3600, first=0.2, factor=3.0, cap=8, late=0.5, sleep=clock.sleep
    )
    waited = 0.0
    for slept in clock.sleeps:
        assert slept <= max(0.2, 0.5 * waited) + 1e-9
        assert slept <= 8
        waited += slept
    assert waited == pytest.approx(clock.now - start)
    assert max(clock.sleeps) == 8


def test_poll_raises_at_the_deadline_and_never_sleeps_past_it(clock):
    start = clock.now
    check = answers(*([None] * 100))
    with pytest.raises(DeadlineExceededError, match="timed out after 10s waiting for the thing"):
        waits.poll(check, what="the thing", timeout=10, first=1, factor=2, cap=3, late=None, sleep=clock.sleep)
    # 1 + 2 + 3 + 3 = 9, then the last sleep is clipped to the 1 s that remains.
    assert clock.sleeps == [1, 2, 3, 3, 1]
    assert clock.now - start == pytest.approx(10)
    assert check.calls == 6  # one last look at the deadline before giving up


def test_poll_with_zero_timeout_checks_once_then_raises(clock):
    check = answers(None)
    with pytest.raises(DeadlineExceededError):
        waits.poll(check, what="x", timeout=0, sleep=clock.sleep)
    assert check.calls == 1
    assert clock.sleeps == []


def test_poll_propagates_errors_from_the_check(clock):
    check = answers(None, InvalidRequestError("NAT gateway failed"))
    with pytest.raises(InvalidRequestError, match="NAT gateway failed"):
        waits.poll(check, what="x", timeout=100, sleep=clock.sleep)
    assert check.calls == 2


# ---- retry ----------------------------------------------------------------------------------------


def test_retry_returns_the_first_success(clock):
    call = answers("ok")
    assert waits.retry(call, what="x", timeout=10, sleep=clock.sleep) == "ok"
    assert call.calls == 1
    assert clock.sleeps == []


def test_retry_retries_retryable_errors_with_jittered_doubling_backoff_capped(clock):
    errors = [TransientError("throttled")] * 6 + [DependencyViolationError("still in use")]
    call = answers(*errors, "ok")
    assert waits.retry(call, what="x", timeout=1000, first=1.0, cap=8.0, sleep=clock.sleep) == "ok"
    assert call.calls == 8
    nominal = [1, 2, 4, 8, 8, 8, 8]
    assert len(clock.sleeps) == len(nominal)
    for slept, delay in zip(clock.sleeps, nominal, strict=True):
        assert 0.5 * delay <= slept <= delay  # full delay times a jitter in [0.5, 1]


@pytest.mark.parametrize(
    "error",
    [InvalidRequestError("bad"), NotFoundError("gone"), ConflictError("exists"), DeadlineExceededError("late")],
)
def test_retry_reraises_non_retryable_errors_immediately(clock, error):
    call = answers(error, "never reached")
    with pytest.raises(type(error)) as caught:
        waits.retry(call, what="x", timeout=1000, sleep=clock.sleep)
    assert caught.value is error
    assert call.calls == 1
    assert clock.sleeps == []


def test_retry_does_not_catch_non_cloud_errors(clock):
    call = answers(ValueError("a bug"), "never reached")
    with pytest.raises(ValueError, match="a bug"):
        waits.retry(call, what="x", timeout=1000, sleep=clock.sleep)
    assert call.calls == 1


def test_retry_on_makes_a_non_retryable_class_retryable(clock):
    call = answers(ConflictError("busy"), ConflictError("busy"), "ok")
    assert waits.retry(call, what="x", timeout=100, retry_on=(ConflictError,), sleep=clock.sleep) == "ok"
    assert call.calls == 3
    # ...but only that class: another non-retryable error still escapes at once.
    other = answers(InvalidRequestError("bad"), "never reached")
    with pytest.raises(InvalidRequestError):
        waits.retry(other, what="x", timeout=100, retry_on=(ConflictError,), sleep=clock.sleep)
    assert other.calls == 1


def test_retry_gives_up_at_the_deadline_chaining_the_last_error(clock):
    start = clock.now
    call = answers(*(TransientError(f"throttled #{i}", code="Throttling") for i in range(100)))
    with pytest.raises(DeadlineExceededError, match=r"gave up on create vpc after 5s") as caught:
        waits.retry(call, what="create vpc", timeout=5, first=1, cap=2, sleep=clock.sleep)
    assert str(caught.value.__cause__) == f"throttled #{call.calls - 1} [Throttling]"
    assert clock.now - start == pytest.approx(5)
    assert 1 < call.calls < 100
    assert all(s <= 2 for s in clock.sleeps)
