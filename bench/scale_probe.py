"""What `api_scale.py` looks at besides the jobs: CPU per process role and for the machine (from /proc),
PostgreSQL connections and the load average while a phase runs, and the cloud_sim proxy's call log.

Linux only (/proc). CPU of a role is its processes' user+system time plus that of their children, live
(scanned in /proc) or reaped (cutime/cstime): PostgreSQL's backends come and go under the postmaster.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float, float] | None:
    """(ppid, own user+system seconds, reaped children's user+system seconds) of a live pid."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    f = raw[raw.rindex(")") + 2 :].split()  # fields after the command name (which may hold spaces)
    return int(f[1]), (int(f[11]) + int(f[12])) / TICK, (int(f[13]) + int(f[14])) / TICK


def cpu_by_role(roles: Mapping[str, Iterable[int]]) -> dict[str, float]:
    """CPU seconds used so far by each role's processes and all their descendants."""
    live = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
    table = {pid: s for pid in live if (s := _stat(pid)) is not None}
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out = {}
    for role, pids in roles.items():
        total, todo = 0.0, [p for p in pids if p in table]
        while todo:
            pid = todo.pop()
            _, own, reaped = table[pid]
            total += own + reaped
            todo += children.get(pid, [])
        out[role] = total
    return out


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, all cores (/proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields) - idle) / TICK, sum(fields) / TICK


def postmaster_pid(data_dir: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int((data_dir / "postmaster.pid").read_text().split()[0])
    return None


@dataclass
class Sampler:
    """Every second, until stopped: the 1-minute load average and, with a URL, PostgreSQL's client
    connections (pg_stat_activity, every database: vmplane's and DBOS's tables)."""

    pg_url: str | None
    loads: list[float] = field(default_factory=list)
    conns: list[int] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> Sampler:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        conn = None
        if self.pg_url:
            import psycopg  # DBOS's driver, installed with vmplane

            with contextlib.suppress(psycopg.Error):
                conn = psycopg.connect(self.pg_url.replace("+psycopg", ""), autocommit=True)
        sql = "select count(*) from pg_stat_activity where backend_type = 'client backend'"
        try:
            while not self._stop.wait(1.0):
                self.loads.append(os.getloadavg()[0])
                if conn is not None:
                    row = conn.execute(sql).fetchone()
                    self.conns.append(int(row[0]) - 1 if row else 0)  # not counting this one
        finally:
            if conn is not None:
                conn.close()


@dataclass
class Usage:
    """CPU used during one phase: per role, and the machine (which includes other users' processes)."""

    wall: float
    roles: dict[str, float]
    machine_busy: float
    machine_total: float

    def to_json(self) -> dict[str, Any]:
        cores = {r: round(s / self.wall, 2) for r, s in self.roles.items()}
        return {
            "cores": cores,  # average cores busy per role over the phase
            "machineCores": round(self.machine_busy / self.wall, 2),
            "machineBusyPct": round(100 * self.machine_busy / self.machine_total, 1) if self.machine_total else 0.0,
        }


class CpuWindow:
    """`with CpuWindow(roles) as w:` ... then `w.usage`; roles are read again at the end (new pids)."""

    def __init__(self, roles: Mapping[str, Iterable[int]]) -> None:
        self.roles = {r: list(p) for r, p in roles.items()}
        self.usage: Usage | None = None

    def __enter__(self) -> CpuWindow:
        self._t0, self._c0, self._m0 = time.perf_counter(), self._read(), machine_cpu()
        return self

    def _read(self) -> dict[str, float]:
        out = cpu_by_role(self.roles)
        own = os.times()
        out["bench"] = own.user + own.system  # this process's threads: the HTTP clients (and no children)
        return out

    def __exit__(self, *exc: object) -> None:
        c1, m1 = self._read(), machine_cpu()
        roles = {r: max(0.0, c1[r] - self._c0.get(r, 0.0)) for r in c1}
        self.usage = Usage(time.perf_counter() - self._t0, roles, m1[0] - self._m0[0], m1[1] - self._m0[1])


def pct(xs: list[float], q: float) -> float:
    return sorted(xs)[min(len(xs) - 1, int(q * len(xs)))] if xs else 0.0


def peak(spans: list[tuple[float, float]]) -> int:
    """The most (start, end) intervals open at one time."""
    now = most = 0
    for _, d in sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans]):
        now += d
        most = max(most, now)
    return most


def proxy_calls(log: Path, start: float, end: float, latency_s: float) -> dict[str, Any]:
    """The proxy's calls that started in [start, end] (epoch): count, answers kept pending, call and
    upstream (call minus the added latency: moto plus the proxy itself) times, and calls in flight."""
    calls = []
    with contextlib.suppress(OSError):
        calls = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    calls = [c for c in calls if start <= c["start"] <= end]
    if not calls:
        return {"calls": 0, "kept": 0}
    dur = [c["end"] - c["start"] for c in calls]
    up = [d - latency_s for d in dur]
    span = max(c["end"] for c in calls) - min(c["start"] for c in calls)
    return {
        "calls": len(calls),
        "kept": sum(bool(c["rewritten"]) for c in calls),
        "refused": sum(c["status"] >= 400 for c in calls),
        "callP50Ms": round(1000 * statistics.median(dur), 1),
        "callP95Ms": round(1000 * pct(dur, 0.95), 1),
        "upstreamP50Ms": round(1000 * statistics.median(up), 1),
        "upstreamP95Ms": round(1000 * pct(up, 0.95), 1),
        "inFlightMean": round(sum(dur) / span, 1) if span > 0 else 0.0,
        "inFlightPeak": peak([(c["start"], c["end"]) for c in calls]),
        "callsPerS": round(len(calls) / span, 1) if span > 0 else 0.0,
    }
