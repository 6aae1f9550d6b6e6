"""A pool's schedule: the hours its VMs run (the seed's ZopNight), e.g.
`{"timezone": "Europe/Berlin", "days": "Mon-Fri", "start": "08:00", "stop": "19:00"}`.

`days` is a comma list of days or day ranges (`Mon-Fri`, `Mon,Wed,Fri`, `Sat-Sun`, `Fri-Mon` wraps);
`start`/`stop` are local times in `timezone` (an IANA zone). A stop earlier than the start runs over
midnight into the next day.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, time, timedelta
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, field_validator, model_validator

from vmplane.envspec.base import SpecModel

DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_TIME = re.compile(r"^([01][0-9]|2[0-3]):([0-5][0-9])$")
HOURS_PER_WEEK = 168.0


def parse_days(text: str) -> list[int]:
    """`Mon-Fri` -> [0, 1, 2, 3, 4] (Monday is 0); ValueError naming the part it cannot read."""
    out: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        first, sep, last = part.partition("-")
        if first not in DAYS or (sep and last not in DAYS):
            raise ValueError(f"{part!r}: days are {', '.join(DAYS)}, as a list (Mon,Wed) or a range (Mon-Fri)")
        a, b = DAYS.index(first), DAYS.index(last) if sep else DAYS.index(first)
        span = range(a, b + 1) if a <= b else [*range(a, 7), *range(0, b + 1)]  # Fri-Mon wraps the week
        out += [d for d in span if d not in out]
    return sorted(out)


def _minutes(text: str) -> int:
    m = _TIME.match(text)
    assert m is not None  # checked by the field validator
    return int(m.group(1)) * 60 + int(m.group(2))


class Schedule(SpecModel):
    timezone: str = Field(description="IANA time zone the times are in, e.g. Europe/Berlin.")
    days: str = Field(description="Days the pool runs: Mon-Fri, Mon,Wed,Fri, Sat-Sun ...")
    start: str = Field(description="Local time the pool starts, HH:MM (24 h).")
    stop: str = Field(description="Local time the pool stops, HH:MM (24 h); earlier than start runs overnight.")

    @field_validator("timezone")
    @classmethod
    def _zone(cls, v: str) -> str:
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"{v!r} is not an IANA time zone (e.g. Europe/Berlin, America/New_York, UTC)") from None
        return v

    @field_validator("days")
    @classmethod
    def _days(cls, v: str) -> str:
        parse_days(v)
        return v

    @field_validator("start", "stop")
    @classmethod
    def _time(cls, v: str) -> str:
        if not _TIME.match(v):
            raise ValueError(f"{v!r} is not a time of day as HH:MM (00:00-23:59)")
        return v

    @model_validator(mode="after")
    def _distinct(self) -> Schedule:
        if self.start == self.stop:
            raise ValueError("start and stop are the same time: leave the schedule out to run all the time")
        return self

    def hours_per_day(self) -> float:
        run = (_minutes(self.stop) - _minutes(self.start)) % (24 * 60)
        return run / 60

    def weekly_hours(self) -> float:
        """Hours a week the pool runs (a DST change shifts one night by an hour; not counted)."""
        return self.hours_per_day() * len(parse_days(self.days))

    def running_share(self) -> float:
        """The fraction of the week the pool runs (1.0 = around the clock)."""
        return self.weekly_hours() / HOURS_PER_WEEK

    # ---- the schedule as the clouds' schedulers and the cost history read it ----
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def overnight(self) -> bool:
        return _minutes(self.stop) < _minutes(self.start)

    def start_days(self) -> list[int]:
        """The weekdays (Monday 0) the pool starts on."""
        return parse_days(self.days)

    def stop_days(self) -> list[int]:
        """The weekdays the pool stops on: the next day for an overnight schedule."""
        shift = 1 if self.overnight() else 0
        return sorted((d + shift) % 7 for d in self.start_days())

    def cron(self, kind: Literal["start", "stop"], style: Literal["unix", "eventbridge"]) -> str:
        """The cron expression that fires at `kind`, in the schedule's own time zone.

        unix (ASG recurrence, GCP instance schedules and scaling schedules): `M H * * DOW`, Sunday 0;
        eventbridge (EventBridge Scheduler): `cron(M H ? * DOW *)` with day names.
        """
        hh, mm = (self.start if kind == "start" else self.stop).split(":")
        days = self.start_days() if kind == "start" else self.stop_days()
        if style == "unix":
            dow = ",".join(str(n) for n in sorted((d + 1) % 7 for d in days))
            return f"{int(mm)} {int(hh)} * * {dow}"
        names = ",".join(DAYS[d].upper() for d in days)
        return f"cron({int(mm)} {int(hh)} ? * {names} *)"

    def windows(self, since: datetime, until: datetime) -> Iterator[tuple[datetime, datetime]]:
        """The running windows that overlap [since, until), clipped to it (aware datetimes)."""
        zone = self.zone()
        start_t, stop_t = time.fromisoformat(self.start), time.fromisoformat(self.stop)
        days = set(self.start_days())
        day = since.astimezone(zone).date() - timedelta(days=1)  # an overnight window from the day before
        last = until.astimezone(zone).date()
        while day <= last:
            if day.weekday() in days:
                begin = datetime.combine(day, start_t, tzinfo=zone)
                end = datetime.combine(day + timedelta(days=1 if self.overnight() else 0), stop_t, tzinfo=zone)
                lo, hi = max(begin, since), min(end, until)
                if lo < hi:
                    yield lo, hi
            day += timedelta(days=1)

    def running_hours(self, since: datetime, until: datetime) -> float:
        """Hours the pool runs between two instants, in wall-clock time (daylight saving included)."""
        # In UTC: the difference of two datetimes in one zone ignores a daylight-saving change between them.
        seconds = (hi.astimezone(UTC) - lo.astimezone(UTC) for lo, hi in self.windows(since, until))
        return sum(s.total_seconds() for s in seconds) / 3600

    def is_running_at(self, at: datetime) -> bool:
        return any(True for _ in self.windows(at, at + timedelta(microseconds=1)))

    def next_change(self, at: datetime) -> tuple[Literal["start", "stop"], datetime]:
        """The next start (if stopped at `at`) or stop (if running), as an aware datetime."""
        for lo, hi in self.windows(at, at + timedelta(days=8)):
            if lo <= at:
                return "stop", hi
            return "start", lo
        raise AssertionError("a schedule runs at least once a week")  # days is never empty
