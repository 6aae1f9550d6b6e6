"""Where the test suite's time goes: per-file wall from pytest's junit xml, CPU by process role, sleeps.

    python bench/suite_time.py run [--json-out F] [--keep DIR] -- PYTEST_ARGS...
    python bench/suite_time.py report JUNIT.xml [JUNIT.xml ...]

`run` starts `python -m pytest -p no:cacheprovider --junitxml=... PYTEST_ARGS` and, every 0.1 s, reads
/proc for every process descending from it: its CPU seconds (user+sys, the last value seen) by role --
pytest (the runner and its xdist workers), the sandbox (`vmplane.sandbox.serve`: moto and the GCP
sandbox), the fork server and the `vmplane` commands it forks (tests/forkserver.py), anything else
(terraform, a subprocess `vmplane`, a browser). The sandbox runs in a session of its own and the fork
server's children are reaped by the kernel, so neither shows in the runner's rusage: /proc is the only
place to read them. A process that lives less than one sample is missed (a short `python -c`), and each
one's last <0.1 s is; the forked commands also write their exact CPU and every `time.sleep` by caller
(SUITE_TIMING_DIR, see tests/forkserver.py), which `run` sums.

On a machine shared with other work the wall time is noisy; the CPU seconds and the sleeps are not.
Compare before/after on the same tests back to back.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

TICK = os.sysconf("SC_CLK_TCK")
ROOT = Path(__file__).resolve().parents[1]


def _proc_table() -> dict[int, tuple[int, float, str]]:
    """pid -> (ppid, cpu seconds, cmdline) for every process readable now."""
    out: dict[int, tuple[int, float, str]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
            cmd = Path(f"/proc/{entry.name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        out[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK, cmd)
    return out


def _role(pid: int, table: dict[int, tuple[int, float, str]], root: int) -> str:
    cmd = table[pid][2]
    if "vmplane.sandbox.serve" in cmd:
        return "sandbox"
    if "tests.forkserver" in cmd:  # the server, its waiters and their commands share the server's argv
        parent = table[pid][0]
        return "fork server" if parent in table and "tests.forkserver" not in table[parent][2] else "forked commands"
    if pid == root or "pytest" in cmd or "execnet" in cmd or "exec(eval(sys.stdin.readline()))" in cmd:
        return "pytest"
    return "other"


def _descendants(table: dict[int, tuple[int, float, str]], root: int) -> set[int]:
    children: dict[int, list[int]] = collections.defaultdict(list)
    for pid, (ppid, _, _) in table.items():
        children[ppid].append(pid)
    seen, todo = {root}, [root]
    while todo:
        for child in children[todo.pop()]:
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return seen


def run(pytest_args: list[str], keep: Path | None) -> dict[str, Any]:
    work = keep or Path(tempfile.mkdtemp(prefix="suite-time-"))
    timing = work / "commands"
    timing.mkdir(parents=True, exist_ok=True)
    junit = work / "junit.xml"
    env = {**os.environ, "SUITE_TIMING_DIR": str(timing)}
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--junitxml={junit}", *pytest_args]
    load_before = os.getloadavg()
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
    cpu: dict[int, tuple[str, float]] = {}  # pid -> (role, last CPU seen)
    cmds: dict[int, str] = {}
    roles: dict[int, str] = {}
    while proc.poll() is None:
        table = _proc_table()
        for pid in _descendants(table, proc.pid):
            if pid in table:
                if pid not in cmds:  # a role is read once: an exited (zombie) process has no cmdline
                    cmds[pid] = table[pid][2][:120]
                    roles[pid] = _role(pid, table, proc.pid)
                cpu[pid] = (roles[pid], table[pid][1])
        time.sleep(0.1)
    wall = time.monotonic() - start
    by_role: dict[str, float] = collections.Counter()
    procs: dict[str, int] = collections.Counter()
    for role, seconds in cpu.values():
        by_role[role] += seconds
        procs[role] += 1
    commands = _commands(timing)
    return {
        "command": " ".join(cmd[1:]),
        "exit": proc.returncode,
        "wall": round(wall, 2),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "cpu_by_role": {k: round(v, 2) for k, v in sorted(by_role.items())},
        "processes_by_role": dict(sorted(procs.items())),
        "cpu_total": round(sum(by_role.values()), 2),
        "commands": commands,
        "busiest": [
            {"pid": p, "role": r, "cpu": round(c, 2), "cmd": cmds[p]}
            for p, (r, c) in sorted(cpu.items(), key=lambda kv: -kv[1][1])[:10]
        ],
        "files": per_file([junit]),
    }


def _commands(timing: Path) -> dict[str, Any]:
    """The forked commands' own records: count, wall, CPU, and the time slept by caller (top 12)."""
    n, wall, cpu = 0, 0.0, 0.0
    slept: dict[str, float] = collections.Counter()
    calls: dict[str, int] = collections.Counter()
    for f in timing.glob("*.json"):
        r = json.loads(f.read_text())
        n, wall, cpu = n + 1, wall + r["wall"], cpu + r["cpu"]
        for where, (count, seconds) in r["sleeps"].items():
            slept[where] += seconds
            calls[where] += count
    top = sorted(slept.items(), key=lambda kv: -kv[1])[:12]
    return {
        "recorded": n,
        "wall": round(wall, 2),
        "cpu": round(cpu, 2),
        "slept": round(sum(slept.values()), 2),
        "sleeps": [{"where": w, "calls": calls[w], "seconds": round(s, 2)} for w, s in top],
    }


def per_file(xmls: list[Path]) -> list[dict[str, Any]]:
    """Per test file: tests, summed time (setup+call+teardown as junit records it) and the longest test."""
    rows: dict[str, dict[str, Any]] = {}
    for xml in xmls:
        for case in ET.parse(xml).getroot().iter("testcase"):
            path = case.get("classname", "").replace(".", "/") + ".py"
            t = float(case.get("time", 0))
            row = rows.setdefault(path, {"file": path, "tests": 0, "seconds": 0.0, "longest": 0.0})
            row["tests"] += 1
            row["seconds"] += t
            row["longest"] = max(row["longest"], t)
    out = sorted(rows.values(), key=lambda r: -r["seconds"])
    for r in out:
        r["seconds"], r["longest"] = round(r["seconds"], 2), round(r["longest"], 2)
    return out


def _print(result: dict[str, Any]) -> None:
    if "wall" in result:
        print(f"# {result['command']}\nexit {result['exit']}, wall {result['wall']} s, "
              f"load {result['load_before']} -> {result['load_after']}")  # fmt: skip
        print(f"CPU seconds by role: {result['cpu_by_role']} (total {result['cpu_total']}); "
              f"processes {result['processes_by_role']}")  # fmt: skip
        c = result["commands"]
        print(f"forked commands recorded: {c['recorded']}, wall {c['wall']} s, CPU {c['cpu']} s, slept {c['slept']} s")
        for s in c["sleeps"]:
            print(f"  {s['seconds']:8.2f} s {s['calls']:6d} x  {s['where']}")
    print(f"{'file':70s} {'tests':>5s} {'seconds':>9s} {'longest':>8s}")
    for r in result["files"]:
        print(f"{r['file']:70s} {r['tests']:5d} {r['seconds']:9.2f} {r['longest']:8.2f}")
    print(f"{'total':70s} {sum(r['tests'] for r in result['files']):5d} "
          f"{sum(r['seconds'] for r in result['files']):9.2f}")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("run")
    r.add_argument("--json-out", type=Path)
    r.add_argument("--keep", type=Path, help="keep the junit xml and the commands' records here")
    r.add_argument("pytest_args", nargs=argparse.REMAINDER)
    rep = sub.add_parser("report")
    rep.add_argument("xml", nargs="+", type=Path)
    args = ap.parse_args()
    if args.mode == "report":
        _print({"files": per_file(args.xml)})
        return 0
    pytest_args = args.pytest_args[1:] if args.pytest_args[:1] == ["--"] else args.pytest_args
    result = run(pytest_args, args.keep)
    _print(result)
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2))
    return int(result["exit"])


if __name__ == "__main__":
    sys.exit(main())
