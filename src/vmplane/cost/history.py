"""What an environment has cost so far, from its job's own history: a ledger (`config["costLedger"]`)
with one entry each time the billed shape changed, and the arithmetic over it.

An entry holds the hourly rate of each line of the estimate at that moment (the prices of that day
stay with it), which lines follow a pool's schedule (with the schedule itself), and which pools were
stopped. Between two entries a line costs `hourly x hours`, where a scheduled line counts the hours its
schedule runs (`Schedule.running_hours`, daylight saving included) instead of wall-clock hours. A pool
that `vmplane stop` stopped costs nothing (but a Fixed pool's disks) until `vmplane start`: its schedule
is paused meanwhile. A scheduled pool `start` started outside its hours carries an override until the
schedule's next stop takes it back.

Entries are written when a phase or an operation succeeds (pipeline/runner.py `finish_job`):
provisioning (dated when its first resource-creating step started), every operation (dated when it
finished), teardown (billing ends). A failed phase writes none: the entry before it runs on.
Pure functions of dicts and times; the only import at module load is the schedule model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from vmplane.envspec.schedule import Schedule

if TYPE_CHECKING:
    from vmplane.cost.estimate import Estimate
    from vmplane.envspec.models import EnvSpec

LEDGER_CAP = 100  # entries kept; older ones are folded into `carried`
HOURS_PER_MONTH = 730.0  # as cost.estimate (not imported: listing environments must stay cheap)

ASSUME_START = "billing counted from when provisioning's first resource-creating step started (a slight over-count)"
ASSUME_CHANGES = "each change counted from when its operation finished; a failed one changes nothing here"
ASSUME_PRICES = "list prices of the day each change was recorded; NAT data prorated from the assumed GB/month"
ASSUME_STOPPED = (
    "a stopped pool stays stopped until `vmplane start` (its schedule is paused meanwhile); "
    "a scheduled pool started outside its hours runs until the schedule's next stop"
)


def new_ledger() -> dict[str, Any]:
    return {"entries": [], "carried": 0.0, "carriedUntil": None, "carriedMissing": []}


def _iso(t: datetime) -> str:
    return _aware(t).astimezone(UTC).isoformat()


def _aware(t: datetime) -> datetime:
    # SQLite gives SQLAlchemy's DateTime back without a zone; vmplane writes UTC.
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def _parse(text: str) -> datetime:
    return _aware(datetime.fromisoformat(text))


# ---- entries -------------------------------------------------------------------------------------


def rates(spec: EnvSpec, est: Estimate, stopped: list[str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The estimate's lines as hourly rates, and the schedules the scheduled ones follow.

    A stopped Fixed pool's instances cost 0 and its disks stay billed; a stopped (or scaled-to-0)
    scaling group has neither, with or without a schedule (it is paused while the pool is stopped).
    On Google Cloud, Cloud NAT bills per VM-hour: it is split per pool, so it follows each pool's
    schedule and stop.
    """
    from vmplane.clouds.registry import descriptor_for
    from vmplane.envspec.models import AsgPool

    pricing = descriptor_for(spec.provider.cloud).pricing
    nat_per_vm = pricing is not None and pricing.nat_per_vm_hour

    out: list[dict[str, Any]] = []
    schedules: dict[str, Any] = {}
    vm_counts: dict[str | None, float] = {x.pool: x.count for x in est.lines if x.kind == "instance" and x.pool}
    for line in est.lines:
        unit = line.unitPrice
        per_hour = 1.0 if line.unit == "hour" else 1 / HOURS_PER_MONTH  # GB-month, GB (a month's data)
        if line.kind == "nat" and nat_per_vm:
            parts = sorted(vm_counts.items(), key=lambda kv: kv[0] or "")
            kind_for_pool = "instance"  # a VM-hour: it follows the pool like its instances
        else:
            parts = [(line.pool, line.count)]
            kind_for_pool = line.kind
        for pool_name, count in parts:
            pool = spec.pools.get(pool_name) if pool_name else None
            hourly = None if unit is None else unit * count * per_hour
            is_asg = isinstance(pool, AsgPool)
            # Outside its schedule a pool's VMs are stopped (Fixed) or gone (scaling group: disks too).
            follows = pool is not None and pool.schedule is not None and (kind_for_pool == "instance" or is_asg)
            # A stopped pool stays off until `vmplane start`, whether or not it has a schedule.
            off = pool_name in stopped and (kind_for_pool == "instance" or is_asg)
            rate: dict[str, Any] = {
                "kind": line.kind,
                "pool": pool_name,
                "type": line.type,
                "hourly": 0.0 if off else hourly,
                "follows": pool_name if follows and not off else None,
            }
            if off:
                rate["stopped"] = True
            out.append(rate)
            if rate["follows"] and pool is not None and pool.schedule is not None:
                schedules[pool_name or ""] = pool.schedule.model_dump(mode="json")
    return out, schedules


def overrides(
    spec: EnvSpec,
    stopped: list[str],
    at: datetime,
    *,
    started: list[str] | None = None,
    previous: dict[str, Any] | None = None,
) -> dict[str, dict[str, Any]]:
    """Scheduled pools that do not follow their schedule from `at` on, until the schedule's next stop
    takes them back: `{"on": True, "until": next stop}` for one `vmplane start` started outside its
    hours. An override of the entry before is carried while it holds (the cloud's scheduler does not
    tell the record). A stopped pool needs none: it is off (`rates`) until `vmplane start`."""
    out: dict[str, dict[str, Any]] = {}
    for name, pool in sorted(spec.pools.items()):
        schedule = pool.schedule
        if schedule is None:
            continue
        if name in stopped:
            continue
        before = ((previous or {}).get("overrides") or {}).get(name)
        if before is not None and before["on"] and _parse(before["until"]) > at:
            out[name] = before
        elif name in (started or []) and not schedule.is_running_at(at):  # until the next stop
            # Windows from `at` on, clipped to it: the first one that runs ends at the next stop.
            later = list(schedule.windows(at, at + timedelta(days=8)))
            out[name] = {"on": True, "until": _iso(later[0][1])}
    return out


def entry(
    spec: EnvSpec,
    stopped: list[str],
    at: datetime,
    event: str,
    key: str,
    *,
    started: list[str] | None = None,
    previous: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ledger entry for the environment's shape as of `at` (priced now, from the pinned table).
    `started`: the pools a `start` operation just started; `previous`: the ledger's last entry."""
    from vmplane.cost.estimate import estimate

    est = estimate(spec)
    line_rates, schedules = rates(spec, est, stopped)
    return {
        "at": _iso(at),
        "event": event,
        "key": key,
        "currency": est.currency,
        "rates": line_rates,
        "schedules": schedules,
        "overrides": overrides(spec, stopped, at, started=started, previous=previous),
        "stopped": sorted(stopped),
        "missing": list(est.missing),  # named there; those lines count nothing here
        "ended": False,
    }


def bare(at: datetime, event: str, key: str, *, ends: bool = False, missing: list[str] | None = None) -> dict[str, Any]:
    """An entry that bills nothing from `at` on: a teardown, or a shape that could not be priced."""
    return {"at": _iso(at), "event": event, "key": key, "rates": [], "schedules": {}, "stopped": [],
            "missing": missing or [], "ended": ends}  # fmt: skip


def ended(at: datetime, key: str = "teardown") -> dict[str, Any]:
    """Teardown done: nothing is billed from here on."""
    return bare(at, "teardown", key, ends=True)


def append(ledger: dict[str, Any] | None, new: dict[str, Any], cap: int = LEDGER_CAP) -> dict[str, Any]:
    """The ledger with `new` appended; an entry whose key is already there is not added twice (a phase's
    end can be recorded again after a crash). Beyond `cap` entries, the oldest are folded into `carried`."""
    out = {**new_ledger(), **(ledger or {})}
    entries = list(out["entries"])
    if any(e.get("key") == new["key"] for e in entries):
        return out
    entries.append(new)
    entries.sort(key=lambda e: _parse(e["at"]))  # provisioning is dated at its start, before its end
    carried, missing = float(out["carried"]), list(out["carriedMissing"])
    while len(entries) > cap:
        first, second = entries[0], entries[1]
        amount, gaps = segment_cost(first, _parse(first["at"]), _parse(second["at"]))
        carried += amount
        missing += [m for m in gaps if m not in missing]
        out["carriedUntil"] = second["at"]
        out.setdefault("since", first["at"])
        entries.pop(0)
    out.update(entries=entries, carried=carried, carriedMissing=missing)
    return out


# ---- arithmetic ----------------------------------------------------------------------------------


def segment_cost(e: dict[str, Any], since: datetime, until: datetime) -> tuple[float, list[str]]:
    """What the shape recorded in `e` costs between two instants, and the lines without a price."""
    if until <= since or e.get("ended"):
        return 0.0, []
    wall = (until - since).total_seconds() / 3600
    schedules = {pool: Schedule.model_validate(s) for pool, s in (e.get("schedules") or {}).items()}
    special = e.get("overrides") or {}
    hours_of = {pool: _pool_hours(s, special.get(pool), since, until) for pool, s in schedules.items()}
    total, missing = 0.0, list(e.get("missing") or [])
    for r in e["rates"]:
        if r["hourly"] is None:
            continue
        follows = r.get("follows") or ""
        total += r["hourly"] * hours_of.get(follows, wall)
    return total, missing


def _pool_hours(schedule: Schedule, override: dict[str, Any] | None, since: datetime, until: datetime) -> float:
    """Hours a scheduled pool runs in [since, until): its schedule's, after an override ends."""
    if override is None:
        return schedule.running_hours(since, until)
    switch = min(max(_parse(override["until"]), since), until)
    forced = (switch - since).total_seconds() / 3600 if override["on"] else 0.0
    return forced + schedule.running_hours(switch, until)


@dataclass
class CostSoFar:
    amount: float
    currency: str
    since: str | None
    until: str
    ended: bool
    assumptions: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "amount": self.amount,
            "currency": self.currency,
            "since": self.since,
            "until": self.until,
            "ended": self.ended,
            "complete": not self.missing,
            "missing": self.missing,
            "assumptions": self.assumptions,
        }


def cost_so_far(ledger: dict[str, Any], now: datetime) -> CostSoFar:
    """Σ over the ledger's entries of each one's cost until the next (the last one: until `now`)."""
    now = _aware(now)
    entries = ledger.get("entries") or []
    amount, missing = float(ledger.get("carried") or 0.0), list(ledger.get("carriedMissing") or [])
    assumptions = [ASSUME_START, ASSUME_CHANGES, ASSUME_PRICES, ASSUME_STOPPED]
    if ledger.get("carriedUntil"):
        assumptions.append(f"entries before {ledger['carriedUntil']} are kept as their sum only")
    until = now
    for i, e in enumerate(entries):
        if e.get("ended"):
            until = min(now, _parse(e["at"]))
            assumptions.append(f"billing ended when the teardown finished ({e['at']})")
            break
        end = _parse(entries[i + 1]["at"]) if i + 1 < len(entries) else now
        part, gaps = segment_cost(e, _parse(e["at"]), min(end, now))
        amount += part
        missing += [m for m in gaps if m not in missing]
        if e.get("assumed"):
            assumptions.append(e["assumed"])
    since = ledger.get("since") or (entries[0]["at"] if entries else None)
    currency = next((e["currency"] for e in entries if e.get("currency")), "USD")
    return CostSoFar(round(amount, 2), currency, since, _iso(until), any(e.get("ended") for e in entries),
                     assumptions, missing)  # fmt: skip


# ---- the job's record ----------------------------------------------------------------------------


def _spec_and_stopped(config: dict[str, Any]) -> tuple[EnvSpec, list[str]]:
    from vmplane.envspec.models import EnvSpec

    return EnvSpec.model_validate(config["spec"]), list((config.get("infra") or {}).get("StoppedPools") or [])


def ledger_of(config: dict[str, Any], created_at: datetime) -> dict[str, Any]:
    """The job's ledger; a job recorded before vmplane kept one gets one entry: today's shape since the
    job was created (said so in the assumptions)."""
    if "costLedger" in config:
        return dict(config["costLedger"])
    spec, stopped = _spec_and_stopped(config)
    first = entry(spec, stopped, created_at, "assumed", "assumed")
    first["assumed"] = (
        f"no cost history on this job (recorded before vmplane kept one): "
        f"its current shape is assumed since the job was created ({first['at']})"
    )
    return append(None, first)


def first_resource_start(steps: list[dict[str, Any]]) -> datetime | None:
    """When provisioning's first resource-creating step (any but stepValidate) started."""
    starts = [_parse(s["startedAt"]) for s in steps if s.get("startedAt") and s.get("name") != "stepValidate"]
    return min(starts) if starts else None


def record_finish(
    config: dict[str, Any], steps: list[dict[str, Any]], phase: str, created_at: datetime, now: datetime
) -> dict[str, Any]:
    """The ledger after a phase ("provision", "operation", "teardown") succeeded. Bookkeeping never
    fails the job: a shape it cannot price becomes an entry that counts nothing and says why."""
    op = config.get("operation") or {}
    if phase == "provision":
        at, event, key = first_resource_start(steps) or now, "provisioned", "provision"
    else:
        at, event, key = now, str(op.get("kind", "operation")), str(op.get("id", _iso(now)))
    try:
        ledger = ledger_of(config, created_at)
        if phase == "teardown":
            return append(ledger, ended(now))
        spec, stopped = _spec_and_stopped(config)
        started = None
        if phase == "operation" and event == "start":
            pool = (op.get("params") or {}).get("pool")
            started = [pool] if pool else sorted(spec.pools)
        previous = ledger["entries"][-1] if ledger["entries"] else None
        return append(ledger, entry(spec, stopped, at, event, key, started=started, previous=previous))
    except (KeyError, ValueError) as err:  # a record this version cannot read
        why = [f"the job's shape could not be priced: {err}"]
        return append(config.get("costLedger"), bare(at, event, key, ends=phase == "teardown", missing=why))


def job_cost_so_far(config: dict[str, Any], created_at: datetime, now: datetime) -> CostSoFar:
    return cost_so_far(ledger_of(config, created_at), now)
