"""A schedule as the clouds' schedulers read it (cron, in its own zone) and as cost history reads it
(running hours between two instants, daylight saving included)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from vmplane.envspec.schedule import Schedule

WEEKDAYS = Schedule(timezone="Europe/Berlin", days="Mon-Fri", start="08:00", stop="20:00")
OVERNIGHT = Schedule(timezone="UTC", days="Fri-Mon", start="22:00", stop="06:00")


def test_cron_expressions_in_both_styles() -> None:
    assert WEEKDAYS.cron("start", "unix") == "0 8 * * 1,2,3,4,5"
    assert WEEKDAYS.cron("stop", "eventbridge") == "cron(0 20 ? * MON,TUE,WED,THU,FRI *)"
    # An overnight run stops the morning after each start day: Sat, Sun, Mon, Tue.
    assert OVERNIGHT.cron("start", "unix") == "0 22 * * 0,1,5,6"
    assert OVERNIGHT.cron("stop", "unix") == "0 6 * * 0,1,2,6"
    assert OVERNIGHT.cron("stop", "eventbridge") == "cron(0 6 ? * MON,TUE,SAT,SUN *)"


def test_running_hours_over_a_week_match_the_weekly_hours() -> None:
    monday = datetime(2026, 11, 30, tzinfo=UTC)
    for s in (WEEKDAYS, OVERNIGHT):
        assert s.running_hours(monday, monday + timedelta(days=7)) == pytest.approx(s.weekly_hours())


def test_a_daylight_saving_night_is_an_hour_shorter() -> None:
    always_weekend = Schedule(timezone="Europe/Berlin", days="Sun", start="00:00", stop="23:00")
    sunday = datetime(2026, 3, 29, tzinfo=UTC) - timedelta(hours=1)  # local midnight, the day clocks go forward
    assert always_weekend.running_hours(sunday, sunday + timedelta(days=1)) == pytest.approx(22.0)


def test_running_now_and_the_next_change() -> None:
    tuesday_3pm_berlin = datetime(2026, 12, 1, 14, 0, tzinfo=UTC)
    assert WEEKDAYS.is_running_at(tuesday_3pm_berlin)
    kind, when = WEEKDAYS.next_change(tuesday_3pm_berlin)
    assert kind == "stop" and when.astimezone(UTC) == datetime(2026, 12, 1, 19, 0, tzinfo=UTC)
    saturday = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
    assert not WEEKDAYS.is_running_at(saturday)
    kind, when = WEEKDAYS.next_change(saturday)
    assert kind == "start" and when.astimezone(UTC) == datetime(2026, 12, 7, 7, 0, tzinfo=UTC)
    # Early Saturday is inside Friday's overnight run.
    assert OVERNIGHT.is_running_at(datetime(2026, 12, 5, 3, 0, tzinfo=UTC))
