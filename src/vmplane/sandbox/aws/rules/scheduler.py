"""EventBridge Scheduler: schedule expressions (at, rate, cron) and time zones as AWS parses them, the
flexible time window's pairing, and a schedule's dates in order. moto stores any string."""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from typing import Any

from vmplane.sandbox.aws.rule import AwsFault, AwsRequest, Clients, Rule
from vmplane.sandbox.aws.rules._common import fault, make_rule, p, request, when

_TYPES = "https://docs.aws.amazon.com/scheduler/latest/UserGuide/schedule-types.html"
_API = "https://docs.aws.amazon.com/scheduler/latest/APIReference/API_CreateSchedule.html"
_WINDOW = "https://docs.aws.amazon.com/scheduler/latest/APIReference/API_FlexibleTimeWindow.html"
_OPS = ("CreateSchedule", "UpdateSchedule")
_FORM = re.compile(r"^(at|rate|cron)\((.*)\)$")
_RATE_UNITS = {"minute", "minutes", "hour", "hours", "day", "days"}


def _bad(message: str) -> AwsFault:
    return fault("ValidationException", message)


def _expression(req: AwsRequest) -> tuple[str, str] | None:
    found = _FORM.match(str(p(req, "ScheduleExpression", "")).strip())
    return (found.group(1), found.group(2).strip()) if found else None


def _form(req: AwsRequest) -> AwsFault | None:
    if _expression(req) is None:
        return _bad(f"Invalid Schedule Expression {p(req, 'ScheduleExpression')}.")
    return None


def _rate(req: AwsRequest) -> AwsFault | None:
    parsed = _expression(req)
    if parsed is None or parsed[0] != "rate":
        return None
    parts = parsed[1].split()
    ok = len(parts) == 2 and parts[0].isdigit() and int(parts[0]) > 0 and parts[1] in _RATE_UNITS
    # The unit is singular for a value of 1 and plural otherwise (rate(1 hour), rate(5 hours)).
    if ok and (int(parts[0]) == 1) != (not parts[1].endswith("s")):
        ok = False
    return None if ok else _bad(f"Invalid Schedule Expression {p(req, 'ScheduleExpression')}.")


def _cron_fields(req: AwsRequest) -> list[str] | None:
    parsed = _expression(req)
    return parsed[1].split() if parsed is not None and parsed[0] == "cron" else None


def _cron_six(req: AwsRequest) -> AwsFault | None:
    fields = _cron_fields(req)
    if fields is not None and len(fields) != 6:
        return _bad(f"Invalid Schedule Expression {p(req, 'ScheduleExpression')}.")
    return None


def _cron_question(req: AwsRequest) -> AwsFault | None:
    fields = _cron_fields(req)
    if fields is not None and len(fields) == 6 and (fields[2] == "?") == (fields[4] == "?"):
        # One of day-of-month and day-of-week must be "?", never both.
        return _bad(f"Invalid Schedule Expression {p(req, 'ScheduleExpression')}.")
    return None


def _at(req: AwsRequest) -> AwsFault | None:
    parsed = _expression(req)
    if parsed is None or parsed[0] != "at":
        return None
    try:
        dt.datetime.strptime(parsed[1], "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return _bad(f"Invalid Schedule Expression {p(req, 'ScheduleExpression')}.")
    return None


def _timezone(req: AwsRequest) -> AwsFault | None:
    zone = p(req, "ScheduleExpressionTimezone")
    if zone is None:
        return None
    try:
        zoneinfo.ZoneInfo(str(zone))
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return _bad(f"Invalid ScheduleExpressionTimezone {zone}.")
    return None


def _window(req: AwsRequest) -> AwsFault | None:
    window = p(req, "FlexibleTimeWindow") or {}
    mode, maximum = window.get("Mode"), window.get("MaximumWindowInMinutes")
    if mode == "FLEXIBLE" and maximum is None:
        return _bad("MaximumWindowInMinutes is required when Mode is FLEXIBLE.")
    if mode == "OFF" and maximum is not None:
        return _bad("MaximumWindowInMinutes must not be set when Mode is OFF.")
    return None


def _dates(req: AwsRequest) -> AwsFault | None:
    start, end = when(p(req, "StartDate")), when(p(req, "EndDate"))
    if start is not None and end is not None and end <= start:
        return _bad("The EndDate must be later than the StartDate.")
    return None


def _schedule(expression: str, **kw: Any) -> Any:
    def example(clients: Clients) -> AwsRequest:
        target = {
            "Arn": "arn:aws:lambda:us-east-1:123456789012:function:f",
            "RoleArn": "arn:aws:iam::123456789012:role/r",
        }
        params: dict[str, Any] = {"FlexibleTimeWindow": {"Mode": "OFF"}, **kw}
        return request(
            "scheduler", "CreateSchedule", Name="nightly", ScheduleExpression=expression, Target=target, **params
        )

    return example


def _rule(rid: str, summary: str, source: str, check: Any, example: Any) -> Rule:
    return make_rule("scheduler", rid, _OPS, summary, source, check, "ValidationException", example)


RULES = (
    _rule("expression-form", "A schedule expression is at(...), rate(...) or cron(...)", _TYPES, _form,
          _schedule("every 5 minutes")),
    _rule("rate-value-and-unit",
          "rate(value unit): a positive integer and minute(s), hour(s) or day(s), singular for 1",
          _TYPES, _rate, _schedule("rate(5 minute)")),
    _rule("cron-six-fields", "A cron expression has six fields (minutes hours day-of-month month day-of-week year)",
          _TYPES, _cron_six, _schedule("cron(0 8 * * MON-FRI)")),
    _rule("cron-day-question-mark", "One of a cron's day-of-month and day-of-week fields is ?, not both",
          _TYPES, _cron_question, _schedule("cron(0 8 * * MON-FRI *)")),
    _rule("at-timestamp", "at(yyyy-mm-ddThh:mm:ss) is a full timestamp", _TYPES, _at,
          _schedule("at(2030-01-01 08:00)")),
    _rule("timezone-known", "ScheduleExpressionTimezone is an IANA time zone", _API, _timezone,
          _schedule("cron(0 8 ? * MON-FRI *)", ScheduleExpressionTimezone="Europe/Springfield")),
    _rule("flexible-window-maximum", "A FLEXIBLE time window needs MaximumWindowInMinutes (and OFF takes none)",
          _WINDOW, _window, _schedule("rate(1 hour)", FlexibleTimeWindow={"Mode": "FLEXIBLE"})),
    _rule("end-after-start", "A schedule's EndDate is later than its StartDate", _API, _dates,
          _schedule("rate(1 hour)", StartDate=dt.datetime(2031, 1, 2, tzinfo=dt.UTC),
                    EndDate=dt.datetime(2031, 1, 1, tzinfo=dt.UTC))),
)  # fmt: skip
