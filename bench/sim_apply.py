"""Time to a ready environment under a simulated slow cloud: vmplane and the generated Terraform stack of the
same file, through bench/cloud_sim.py in front of one moto sandbox, against the critical path.

    python bench/sim_apply.py [--example examples/web.jsonc] [--latency-ms 50] [--factor 0.1]
                              [--modes sim,latency] [--no-terraform] [--json-out FILE] [--keep-logs DIR]

Mode `sim`: per-call latency plus the pending states (real durations x factor, cloud_sim.REAL_S); mode
`latency`: the latency only. In each mode, in this order and through one proxy: `vmplane apply`, `vmplane
destroy` (a fresh VMPLANE_HOME, `--sandbox` = the proxy's port), then `vmplane tf generate --sandbox` and
`terraform init` (not timed), `terraform apply`, `terraform destroy`. One unmeasured apply+destroy straight
against moto first warms its catalogues. The critical path is bench/sim_model.py's, each dependent call
weighted by the median call time the proxy logged for vmplane's apply in that mode.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import cloud_sim
import sim_model
from apply_sandbox import BenchError, Phase, free_port, note, phase, run_cli, sandbox_env, start_sandbox, stop_sandbox

TF_TIMEOUT = 1800


@dataclass
class Run:
    """One phase of one tool in one mode: wall time and what the proxy logged in its window."""

    mode: str
    tool: str
    kind: str
    wall: float
    start: float  # epoch seconds
    end: float
    span: float | None = None  # vmplane only: first step start -> last step end
    calls: int = 0
    call_sum: float = 0.0  # sum of the calls' durations
    busy: float = 0.0  # time with at least one call in flight
    median_call: float = 0.0
    rewritten: int = 0  # answers the proxy kept pending
    steps: dict[str, float] = field(default_factory=dict)  # vmplane: its steps; Terraform: its resources


_TF_DONE = re.compile(r"^(\S+): (?:Creation|Destruction) complete after (?:(\d+)m)?(\d+)s", re.MULTILINE)


def window(log: Path, run: Run) -> list[dict[str, Any]]:
    calls = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [c for c in calls if run.start <= c["start"] and c["end"] <= run.end]


def fill(run: Run, log: Path) -> Run:
    calls = window(log, run)
    run.calls, run.rewritten = len(calls), sum(bool(c["rewritten"]) for c in calls)
    durations = [c["end"] - c["start"] for c in calls]
    run.call_sum = sum(durations)
    run.median_call = statistics.median(durations) if durations else 0.0
    busy, reach = 0.0, 0.0
    for c in sorted(calls, key=lambda c: c["start"]):
        lo = max(c["start"], reach)
        if c["end"] > lo:
            busy, reach = busy + c["end"] - lo, c["end"]
    run.busy = busy
    return run


def vmplane_run(mode: str, kind: str, example: Path, env: dict[str, str]) -> tuple[Run, Phase]:
    t0 = time.time()
    p = phase(kind, example, env)
    return Run(mode, "vmplane", kind, p.wall, t0, time.time(), span=p.span, steps=p.steps), p


def tf_env(base: Path) -> dict[str, str] | None:
    """Terraform through the provider mirror, as tests/helpers.py:terraform_env sets it up; None if absent."""
    mirror = next(
        (
            m
            for m in (os.environ.get("VMPLANE_TF_MIRROR", ""), "/opt/tf-plugins")
            if m and Path(m, "registry.terraform.io").is_dir()
        ),
        None,
    )
    if not shutil.which("terraform") or mirror is None:
        return None
    rc = base / "terraformrc"
    rc.write_text(
        "provider_installation {\n"
        f'  filesystem_mirror {{\n    path    = "{mirror}"\n    include = ["registry.terraform.io/*/*"]\n  }}\n'
        '  direct {\n    exclude = ["registry.terraform.io/*/*"]\n  }\n}\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "TF_"))}
    return env | {"TF_CLI_CONFIG_FILE": str(rc), "TF_IN_AUTOMATION": "1", "CHECKPOINT_DISABLE": "1"}


def terraform(mode: str, kind: str, stack: Path, env: dict[str, str]) -> Run:
    args = (
        ["terraform", kind, "-auto-approve", "-input=false", "-no-color"]
        if kind != "init"
        else ["terraform", "init", "-input=false", "-no-color"]
    )
    t0, p0 = time.time(), time.perf_counter()
    proc = subprocess.run(args, cwd=stack, env=env, capture_output=True, text=True, timeout=TF_TIMEOUT, check=False)
    wall = time.perf_counter() - p0
    (stack / f"{kind}.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise BenchError(f"terraform {kind} exited {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    steps = {m[1]: 60.0 * int(m[2] or 0) + int(m[3]) for m in _TF_DONE.finditer(proc.stdout)}
    return Run(mode, "terraform", kind, wall, t0, time.time(), steps=steps)


def one_mode(
    mode: str, factor: float, args: argparse.Namespace, base: Path, sb_env: dict[str, str], t0: float
) -> dict[str, Any]:
    log = (args.keep_logs or base) / f"calls-{mode}.jsonl"
    log.unlink(missing_ok=True)
    upstream = f"http://127.0.0.1:{sb_env['VMPLANE_SANDBOX_PORT']}"
    proxy = cloud_sim.serve(upstream, free_port(), args.latency_ms, factor, log)
    port = str(proxy.server_address[1])
    env = sb_env | {"VMPLANE_HOME": str(base / f"home-{mode}"), "VMPLANE_SANDBOX_PORT": port}
    runs: list[Run] = []
    errors: list[str] = []
    try:
        try:
            for kind in ("apply", "destroy"):
                run, _ = vmplane_run(mode, kind, args.example, env)
                runs.append(fill(run, log))
                note(f"{mode}: vmplane {kind} {run.wall:.1f} s, {run.calls} calls", t0)
        except BenchError as err:
            errors.append(f"vmplane: {err}")
        tenv = None if args.no_terraform or errors else tf_env(base)
        if tenv is not None:
            try:
                terraform_phases(mode, args, base, env, tenv, log, runs, t0)
            except BenchError as err:
                errors.append(f"terraform: {err}")
        elif not args.no_terraform and not errors:
            note("terraform or its provider mirror is absent: Terraform not measured", t0)
    finally:
        proxy.shutdown()
        proxy.server_close()
    for e in errors:
        note(f"{mode}: FAILED {e[:3000]}", t0)
    if not runs:
        raise BenchError(f"{mode}: nothing measured")
    call_s = runs[0].median_call
    paths = {}
    for kind, model in (("apply", sim_model.APPLY), ("destroy", sim_model.DESTROY)):
        length, chain, calls = sim_model.critical_path(model, call_s, factor)
        paths[kind] = {"seconds": length, "chain": chain, "dependentCalls": calls}
    return {
        "mode": mode,
        "factor": factor,
        "callSeconds": call_s,
        "runs": [asdict(r) for r in runs],
        "criticalPath": paths,
        "errors": errors,
    }


def terraform_phases(
    mode: str,
    args: argparse.Namespace,
    base: Path,
    env: dict[str, str],
    tenv: dict[str, str],
    log: Path,
    runs: list[Run],
    t0: float,
) -> None:
    stack = (args.keep_logs or base) / f"stack-{mode}"
    _, proc = run_cli(["tf", "generate", "-f", str(args.example), "-d", str(stack), "--sandbox"], env)
    if proc.returncode != 0:
        raise BenchError(f"vmplane tf generate failed: {proc.stderr}")
    terraform(mode, "init", stack, tenv)
    for kind in ("apply", "destroy"):
        try:
            runs.append(fill(terraform(mode, kind, stack, tenv), log))
        except BenchError:
            if kind == "apply":  # leave the sandbox clean for the next mode (unmeasured)
                subprocess.run(
                    ["terraform", "destroy", "-auto-approve", "-input=false"],
                    cwd=stack,
                    env=tenv,
                    capture_output=True,
                    timeout=TF_TIMEOUT,
                    check=False,
                )
            raise
        note(f"{mode}: terraform {kind} {runs[-1].wall:.1f} s, {runs[-1].calls} calls", t0)


def verdict(ok: bool) -> str:
    return "MET" if ok else "NOT MET"


def report(results: list[dict[str, Any]], args: argparse.Namespace) -> str:
    out = [
        f"# time to done through cloud_sim: {args.example} (latency {args.latency_ms:.0f} ms; seconds)",
        "",
        f"{'mode':8} {'tool':10} {'phase':8} {'wall':>7} {'span':>7} {'calls':>5} {'call-sum':>8} {'busy':>7} "
        f"{'kept':>4} {'crit':>7} {'wall/crit':>9}",
    ]
    for res in results:
        for r in res["runs"]:
            crit = res["criticalPath"][r["kind"]]["seconds"]
            span = f"{r['span']:7.2f}" if r["span"] is not None else f"{'-':>7}"
            # Without pending states the path is the dependent-call chain, reported below; no ratio here.
            ratio = f"{crit:7.2f} {r['wall'] / crit:9.2f}" if res["factor"] > 0 else f"{'-':>7} {'-':>9}"
            out.append(
                f"{res['mode']:8} {r['tool']:10} {r['kind']:8} {r['wall']:7.2f} {span} {r['calls']:5d} "
                f"{r['call_sum']:8.2f} {r['busy']:7.2f} {r['rewritten']:4d} {ratio}"
            )
    out += [
        "",
        "wall: the whole process; span: vmplane's job, first step start -> last step end; call-sum: the",
        "calls' durations added up; busy: time with a call in flight; kept: answers kept pending.",
        "",
    ]
    for res in results:
        out.append(
            f"## {res['mode']} (factor {res['factor']}; one dependent call = {res['callSeconds'] * 1000:.0f} ms)"
        )
        for kind, cp in res["criticalPath"].items():
            chain = " -> ".join(cp["chain"])
            out.append(f"critical path, {kind}: {cp['seconds']:.2f} s, {cp['dependentCalls']} dependent calls: {chain}")
        vm = {r["kind"]: r for r in res["runs"] if r["tool"] == "vmplane"}
        for kind in vm:
            steps = ", ".join(f"{n.removeprefix('step')} {s:.1f}" for n, s in vm[kind]["steps"].items() if s >= 0.3)
            out.append(f"vmplane {kind} steps >= 0.3 s: {steps}")
        tf = {r["kind"]: r for r in res["runs"] if r["tool"] == "terraform"}
        for kind in tf:
            slow = sorted(tf[kind]["steps"].items(), key=lambda kv: -kv[1])[:5]
            out.append(f"terraform {kind}, slowest resources: {', '.join(f'{n} {s:.0f}' for n, s in slow)}")
        cp = {k: v["seconds"] for k, v in res["criticalPath"].items()}
        if res["errors"]:
            out += [f"FAILED ({res['mode']}): {e.splitlines()[0]}" for e in res["errors"]]
        if "destroy" not in vm:
            out.append("")
            continue
        if res["factor"] > 0:
            a, d = vm["apply"]["wall"], vm["destroy"]["wall"]
            lim = 1.25 * cp["apply"]
            out.append(f"target: apply <= 1.25x critical path: {a:.2f} vs {lim:.2f} -> {verdict(a <= lim)}")
            if "apply" in tf:
                t = tf["apply"]["wall"]
                out.append(f"target: apply <= 0.5x Terraform's: {a:.2f} vs {0.5 * t:.2f} -> {verdict(a <= 0.5 * t)}")
            lim = 1.5 * cp["destroy"]
            out.append(f"target: destroy <= 1.5x critical path: {d:.2f} vs {lim:.2f} -> {verdict(d <= lim)}")
        else:
            span = vm["apply"]["span"]
            for lookups in (False, True):
                n, _, deep = sim_model.critical_path(sim_model.APPLY, res["callSeconds"], 0, lookups=lookups)
                what = "with a lookup before each create" if lookups else "minimal"
                out.append(
                    f"target: apply span <= 2x the dependent-call chain ({what}: {deep} calls, {n:.2f} s): "
                    f"{span:.2f} vs {2 * n:.2f} -> {verdict(span <= 2 * n)}"
                )
        out.append("")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    t0 = time.perf_counter()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--example", type=Path, default=Path("examples/web.jsonc"))
    ap.add_argument("--latency-ms", type=float, default=50.0)
    ap.add_argument("--factor", type=float, default=0.1)
    ap.add_argument("--modes", default="sim,latency", help="comma-separated: sim, latency")
    ap.add_argument("--no-terraform", action="store_true")
    ap.add_argument("--json-out", type=Path)
    ap.add_argument("--keep-logs", type=Path, help="write the proxy's JSONL call logs here")
    args = ap.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or set(modes) - {"sim", "latency"}:
        ap.error("--modes takes sim and/or latency")
    if args.keep_logs:
        args.keep_logs.mkdir(parents=True, exist_ok=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="vmplane-sim-") as tmp:
        for mode in modes:
            # A fresh sandbox per mode: after the sim mode's Terraform destroy and the latency mode's vmplane
            # apply+destroy, moto once still held the domain's A record (bench/README.md, issue 12).
            base = Path(tmp) / mode
            sb_env = sandbox_env(base / "sandbox")
            try:
                start_sandbox(sb_env)
                warm = [phase(k, args.example, sb_env) for k in ("apply", "destroy")]  # moto's catalogues
                note(
                    f"{mode}: sandbox up; unmeasured warm-up apply {warm[0].wall:.1f} s, destroy {warm[1].wall:.1f} s",
                    t0,
                )
                results.append(one_mode(mode, args.factor if mode == "sim" else 0.0, args, base, sb_env, t0))
            finally:
                stop_sandbox(sb_env)
                note(f"{mode}: sandbox stopped", t0)
    print(report(results, args))
    failed = any(r["errors"] for r in results)
    if args.json_out:
        data = {
            "example": str(args.example),
            "latencyMs": args.latency_ms,
            "realSeconds": cloud_sim.REAL_S,
            "modes": results,
        }
        args.json_out.write_text(json.dumps(data, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as err:
        print(f"FAILED: {err}", file=sys.stderr)
        sys.exit(1)
