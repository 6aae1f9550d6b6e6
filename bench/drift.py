"""What a drift check costs: `vmplane drift` per example on a warm sandbox, and its cloud API calls.

In a fresh VMPLANE_HOME with the sandbox on free ports, each example is applied once (untimed), then:
`vmplane drift NAME --output json` N times (whole process wall, median/min/max), and the same check once
in this process (`jobs.drift.check`) with the per-call tally every driver feeds (`clouds.base.API_CALLS`):
how many calls it makes, by operation, and that none of them is a mutating one. Each environment is
destroyed at the end; the sandbox is always stopped.

    python bench/drift.py [--runs 5] [--example examples/fixed.jsonc ...] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from apply_sandbox import BenchError, run_cli, sandbox_env, start_sandbox, stop_sandbox

EXAMPLES = ["examples/fixed.jsonc", "examples/web.jsonc", "examples/gcp-fixed.jsonc", "examples/gcp-web.jsonc"]
# An operation name that changes something (AWS's verbs; GCP's and Proxmox's are the HTTP method).
MUTATING = re.compile(
    r"(^|\.)(Create|Delete|Modify|Put|Attach|Detach|Authorize|Revoke|Register|Deregister|Run|Start|Stop|Terminate"
    r"|Tag|Untag|Update|Set|Send|Replace|insert|delete|patch|update|set|start|stop|POST|PUT|DELETE)"
)


def in_process_check(name: str) -> tuple[float, Counter[str], int]:
    """One check in this process: seconds, the API calls by operation, and how many resources drifted."""
    from vmplane.clouds.base import API_CALLS
    from vmplane.jobs import drift
    from vmplane.jobs.listings import find_job
    from vmplane.settings import Settings

    job = find_job(Settings(), name)
    tally: Counter[str] = Counter()
    token = API_CALLS.set(tally)
    try:
        started = time.perf_counter()
        report = drift.check(job)
        seconds = time.perf_counter() - started
    finally:
        API_CALLS.reset(token)
    return seconds, tally, len(report.drift)


def bench_example(example: str, runs: int, env: dict[str, str]) -> dict[str, Any]:
    from vmplane.envspec.load import load_spec

    name = load_spec(Path(example)).name
    _, applied = run_cli(["apply", "-f", example, "--sandbox", "--yes", "--output", "json"], env)
    if applied.returncode != 0:
        raise BenchError(f"apply of {example} failed: {applied.stderr[-2000:]}")
    walls = []
    try:
        for _ in range(runs):
            wall, proc = run_cli(["drift", name, "--output", "json"], env)
            if proc.returncode != 0:
                raise BenchError(f"drift of {example} exited {proc.returncode}: {proc.stderr[-2000:]}")
            walls.append(wall)
        seconds, calls, drifted = in_process_check(name)
    finally:
        run_cli(["destroy", "-f", example, "--sandbox", "--yes", "--output", "json"], env)
    mutating = sorted(op for op in calls if MUTATING.search(op.rsplit(".", 1)[-1]))
    return {
        "example": example,
        "wall": {"median": statistics.median(walls), "min": min(walls), "max": max(walls), "runs": walls},
        "inProcessSeconds": seconds,
        "apiCalls": sum(calls.values()),
        "byOperation": dict(sorted(calls.items())),
        "mutating": mutating,
        "drifted": drifted,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--example", action="append", help="an example file (repeatable; default: four examples)")
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="vmplane-bench-drift-") as home:
        env = sandbox_env(home)
        os.environ.update({k: env[k] for k in ("VMPLANE_HOME", "VMPLANE_SANDBOX_PORT", "VMPLANE_GCP_SANDBOX_PORT")})
        results = []
        try:
            start_sandbox(env)
            for example in args.example or EXAMPLES:
                results.append(bench_example(example, args.runs, env))
        finally:
            stop_sandbox(env)
    print(f"{'example':28} {'median':>7} {'min':>6} {'max':>6} {'in-proc':>8} {'calls':>6}  mutating")
    for r in results:
        w = r["wall"]
        print(
            f"{r['example']:28} {w['median']:7.2f} {w['min']:6.2f} {w['max']:6.2f} {r['inProcessSeconds']:8.2f} "
            f"{r['apiCalls']:6d}  {', '.join(r['mutating']) or 'none'}"
        )
    if args.json_out:
        args.json_out.write_text(json.dumps(results, indent=2))
    bad = [r for r in results if r["mutating"] or r["drifted"]]
    for r in bad:
        print(f"FAIL {r['example']}: mutating calls {r['mutating']}, {r['drifted']} drifted on a clean apply")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
