"""Wall time of `vmplane apply` / `vmplane destroy` on a warm sandbox, split per step and process overhead.

Runs the real CLI (`python -m vmplane`, no shim) in subprocesses against one sandbox started once in a
fresh VMPLANE_HOME on a free 127.0.0.1 port. The first apply+destroy is reported separately as the cold
run (moto loads its AMI/SSM catalogues on first use); then N warm runs.

    python bench/apply_sandbox.py [--runs N] [--example examples/fixed.jsonc] [--json-out FILE]

Works for every cloud the sandbox emulates (AWS and Google Cloud: `--example examples/gcp-web.jsonc`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

VMPLANE = [sys.executable, "-m", "vmplane"]
TARGET_APPLY_S, TARGET_DESTROY_S = 5.0, 3.0
TARGET_APPLY_LB_S = 8.0  # issue 3: the 11-step apply with a load balancer


@dataclass
class Phase:
    """One apply or destroy: whole-process wall time and what the job recorded."""

    kind: str
    wall: float
    steps: dict[str, float]  # step name -> seconds (finishedAt - startedAt)
    api_calls: dict[str, int]  # step name -> API calls in that step
    span: float  # first step start -> last step end (steps + the gaps between them)
    calls_by_op: dict[str, int] = field(default_factory=dict)
    example: str = ""  # the env file: its cloud's driver says how the steps depend on each other

    @property
    def critical_path(self) -> float:
        """Sum over the waves (the order of completion) of the slowest step in each. Steps start at
        milestones before their wave, and a step's duration includes its wait for its inputs to complete
        (pipeline/stepgraph.py), so the span can be shorter than this; it bounds lockstep waves."""
        from vmplane.clouds.registry import driver_for
        from vmplane.envspec.load import load_spec
        from vmplane.pipeline.plan import waves
        from vmplane.pipeline.steps import step_dependencies
        from vmplane.target import Target

        spec = load_spec(Path(self.example))
        depends = step_dependencies(driver_for(Target.for_spec(spec, "http://127.0.0.1:1")))
        return sum(max(self.steps[n] for n in wave) for wave in waves(list(self.steps), depends))

    @property
    def step_sum(self) -> float:
        return sum(self.steps.values())

    @property
    def total_calls(self) -> int:
        return sum(self.api_calls.values())


class BenchError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_cli(args: Sequence[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    proc = subprocess.run([*VMPLANE, *args], env=env, capture_output=True, text=True, timeout=600, check=False)
    return time.perf_counter() - t0, proc


def _ts(value: str) -> datetime:
    return datetime.fromisoformat(value)


def phase(kind: str, example: Path, env: dict[str, str]) -> Phase:
    wall, proc = run_cli([kind, "-f", str(example), "--sandbox", "--yes", "--output", "json"], env)
    want, key = ("succeeded", "steps") if kind == "apply" else ("deleted", "teardownSteps")
    try:
        job = json.loads(proc.stdout)
    except ValueError:
        job = {}
    if proc.returncode != 0 or job.get("status") != want:
        raise BenchError(
            f"vmplane {kind} exited {proc.returncode} with status {job.get('status')!r} (wanted {want!r})\n"
            f"--- stderr (tail) ---\n{proc.stderr[-3000:]}\n--- stdout (head) ---\n{proc.stdout[:1500]}"
        )
    steps, calls, by_op = {}, {}, {}
    for s in job[key]:
        if s["status"] != "succeeded":
            raise BenchError(f"{kind}: step {s['name']} is {s['status']}: {s.get('error')}")
        steps[s["name"]] = (_ts(s["finishedAt"]) - _ts(s["startedAt"])).total_seconds()
        calls[s["name"]] = sum(s["apiCalls"].values())
        for op, n in s["apiCalls"].items():
            by_op[op] = by_op.get(op, 0) + n
    span = (_ts(job[key][-1]["finishedAt"]) - _ts(job[key][0]["startedAt"])).total_seconds()
    return Phase(kind, wall, steps, calls, span, by_op, str(example))


def _gone(pid: int, wait: float) -> bool:
    """True once `pid` no longer exists (checked every 50 ms for up to `wait` seconds)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def sandbox_env(home: str | Path) -> dict[str, str]:
    """The environment of a fresh VMPLANE_HOME with the sandbox on free ports."""
    return {
        **os.environ,
        "VMPLANE_HOME": str(home),
        "VMPLANE_SANDBOX_PORT": str(free_port()),
        "VMPLANE_GCP_SANDBOX_PORT": str(free_port()),
    }


def start_sandbox(env: dict[str, str]) -> float:
    """`vmplane sandbox start` in `env`; its wall time (BenchError if it failed)."""
    wall, proc = run_cli(["sandbox", "start"], env)
    if proc.returncode != 0:
        raise BenchError(f"sandbox start failed ({proc.returncode}): {proc.stderr or proc.stdout}")
    return wall


def stop_sandbox(env: dict[str, str]) -> None:
    """`vmplane sandbox stop`, then make sure the pid it had recorded (our sandbox) is really gone.

    `sandbox stop` gives up silently after 10 s and deletes sandbox.json, so the pid is read first; a
    sandbox still running 5 s later gets SIGTERM again, then SIGKILL, and a warning.
    """
    pid = None
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        pid = int(json.loads((Path(env["VMPLANE_HOME"]) / "sandbox.json").read_text())["pid"])
    with contextlib.suppress(subprocess.TimeoutExpired):
        run_cli(["sandbox", "stop"], env)
    if pid is None or _gone(pid, 5):
        return
    print(f"WARNING: sandbox pid {pid} still runs 5 s after `vmplane sandbox stop`; signalling it", file=sys.stderr)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        if _gone(pid, 5):
            return


def _mmm(xs: Sequence[float]) -> str:
    return f"{statistics.median(xs):6.2f} {min(xs):6.2f} {max(xs):6.2f}"


def report(kind: str, runs: list[Phase], cold: Phase, target: float) -> str:
    walls = [r.wall for r in runs]
    lines = [
        f"## {kind} ({len(runs)} warm runs; seconds)",
        f"{'':34} {'median':>6} {'min':>6} {'max':>6}   cold",
        f"{'wall (whole process)':34} {_mmm(walls)}   {cold.wall:5.2f}",
        f"{'sum of step durations':34} {_mmm([r.step_sum for r in runs])}   {cold.step_sum:5.2f}",
        f"{'critical path (slowest per wave)':34} {_mmm([r.critical_path for r in runs])}   {cold.critical_path:5.2f}",
        f"{'span (first start -> last end)':34} {_mmm([r.span for r in runs])}   {cold.span:5.2f}",
        f"{'gaps between steps (span - sum)':34} {_mmm([r.span - r.step_sum for r in runs])}"
        f"   {cold.span - cold.step_sum:5.2f}",
        f"{'process overhead (wall - span)':34} {_mmm([r.wall - r.span for r in runs])}   {cold.wall - cold.span:5.2f}",
        f"{'overhead total (wall - sum)':34} {_mmm([r.wall - r.step_sum for r in runs])}"
        f"   {cold.wall - cold.step_sum:5.2f}",
        "",
        f"{'step':34} {'median':>6} {'min':>6} {'max':>6}   cold  calls",
    ]
    for name in runs[0].steps:
        ds = [r.steps[name] for r in runs]
        calls = statistics.median(r.api_calls[name] for r in runs)
        lines.append(f"{name:34} {_mmm(ds)}   {cold.steps[name]:5.2f}  {calls:5.0f}")
    totals = [r.total_calls for r in runs]
    lines.append(f"{'total API calls':34} {'':27}  {statistics.median(totals):5.0f}")
    verdict = "MET" if statistics.median(walls) < target else "NOT MET"
    lines.append(f"target: median wall < {target:.0f} s -> {verdict} ({statistics.median(walls):.2f} s)")
    return "\n".join(lines)


def note(msg: str, t0: float) -> None:
    print(f"[{time.perf_counter() - t0:6.1f} s] {msg}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    t0 = time.perf_counter()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--example", type=Path, default=Path("examples/fixed.jsonc"))
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error("--runs must be at least 1")

    with tempfile.TemporaryDirectory(prefix="vmplane-bench-") as home:
        env = sandbox_env(home)
        try:
            start_wall = start_sandbox(env)
            note(f"sandbox start: {start_wall:.2f} s on port {env['VMPLANE_SANDBOX_PORT']}", t0)
            cold = [phase("apply", args.example, env), phase("destroy", args.example, env)]
            note(f"cold run: apply {cold[0].wall:.2f} s, destroy {cold[1].wall:.2f} s", t0)
            runs: list[tuple[Phase, Phase]] = []
            for i in range(args.runs):
                runs.append((phase("apply", args.example, env), phase("destroy", args.example, env)))
                note(f"run {i + 1}: apply {runs[-1][0].wall:.2f} s, destroy {runs[-1][1].wall:.2f} s", t0)
        finally:
            stop_sandbox(env)
            note("sandbox stopped", t0)

    print(f"# vmplane apply/destroy on the sandbox: {args.example} (python -m vmplane)")
    print(f"sandbox start: {start_wall:.2f} s (once, before the cold run)\n")
    target = TARGET_APPLY_LB_S if "stepCreateLoadBalancer" in cold[0].steps else TARGET_APPLY_S
    print(report("apply", [a for a, _ in runs], cold[0], target) + "\n")
    print(report("destroy", [d for _, d in runs], cold[1], TARGET_DESTROY_S))
    if args.json_out:
        data = {
            "example": str(args.example),
            "sandboxStartWall": start_wall,
            "cold": [asdict(p) for p in cold],
            "runs": [[asdict(a), asdict(d)] for a, d in runs],
        }
        args.json_out.write_text(json.dumps(data, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as err:
        print(f"FAILED: {err}", file=sys.stderr)
        sys.exit(1)
