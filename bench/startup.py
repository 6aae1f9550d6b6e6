"""Start-up cost of the CLI: `--help`, `validate`, the read-only commands, and apply/destroy overhead.

    python bench/startup.py [--runs 10] [--example examples/fixed.jsonc] [--apply-runs 3] [--no-sandbox]

Read-only commands (`status NAME`, `jobs`, `envs`, each as text and `--output json`) run in a fresh
VMPLANE_HOME whose DB holds a few jobs, applied first on a sandbox started there on a free port. The
apply/destroy overhead is each process's wall time minus the sum of the step durations recorded on
its job (the same definition as bench/apply_sandbox.py's "overhead total"). `--no-sandbox` skips both.

The product number is `python -m vmplane` (sys.executable). The console script is timed too, both the
real one next to the interpreter and, if different, the `vmplane` found on PATH (e.g. a pyenv shim,
a bash script that re-resolves the interpreter and adds its own start-up). Exits 1 if boto3, botocore,
dbos, moto, sqlalchemy or alembic are imported by `--help` or `validate`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

HEAVY = ("boto3", "botocore", "dbos", "moto", "sqlalchemy", "alembic")
OTHER = ("rich", "pydantic", "pydantic_settings", "yaml", "typer", "click")
TARGET_S = 0.3

TARGET_READ_S, TARGET_OVERHEAD_S = 0.3, 0.5
# Run in a fresh interpreter: run `python -m vmplane ARGS` in-process (no args: import the package's
# entry module only), then report the loaded modules. Works whatever module holds the Typer app.
PROBE = """
import contextlib, io, json, runpy, sys
args = json.loads(sys.argv[1])
code = None
with contextlib.redirect_stdout(io.StringIO()):
    if args:
        sys.argv = ["vmplane", *args]
        try:
            runpy.run_module("vmplane", run_name="__main__")
        except SystemExit as exit_:
            code = exit_.code or 0
    else:
        try:
            import vmplane.cli.main  # noqa: F401
        except ImportError:  # before the CLI was split into modules
            import vmplane.cli.app  # noqa: F401
names = {m.split(".")[0] for m in sys.modules}
print(json.dumps({"exit": code, "modules": sorted(names)}))
"""


def wall(cmd: Sequence[str], runs: int, env: dict[str, str] | None = None) -> list[float]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False, env=env)
        times.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            raise SystemExit(f"FAILED: {' '.join(cmd)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return times


def importtime(args: Sequence[str], env: dict[str, str] | None = None) -> list[tuple[int, int, str]]:
    """(self µs, cumulative µs, indented name) for each import of `python -X importtime -m vmplane ARGS`."""
    cmd = [sys.executable, "-X", "importtime", "-m", "vmplane", *args]
    err = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True, env=env).stderr
    rows = []
    for line in err.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) == 3 and parts[0].strip().isdigit():
            rows.append((int(parts[0]), int(parts[1]), parts[2].rstrip()))
    return rows


def probe(args: Sequence[str], env: dict[str, str] | None = None) -> tuple[int | None, set[str]]:
    cmd = [sys.executable, "-c", PROBE, json.dumps(list(args))]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        raise SystemExit(f"FAILED: probe {args}: {out.stderr[-2000:]}")
    data = json.loads(out.stdout.strip().splitlines()[-1])
    return data["exit"], set(data["modules"])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--example", default="examples/fixed.jsonc")
    ap.add_argument("--apply-runs", type=int, default=3, help="apply+destroy pairs for the overhead numbers")
    ap.add_argument("--no-sandbox", action="store_true", help="skip the read-only and apply/destroy sections")
    args = ap.parse_args(argv)
    help_args, validate_args = ["--help"], ["validate", "-f", args.example]
    cost_args = ["cost", "-f", args.example]

    launchers: list[tuple[str, list[str]]] = [("python -m vmplane", [sys.executable, "-m", "vmplane"])]
    script = Path(sysconfig.get_path("scripts")) / "vmplane"
    if script.exists():
        launchers.append((f"console script {script}", [str(script)]))
    # A pyenv shim puts the interpreter's bin first on PATH for its children: look past that entry.
    rest = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if Path(p) != script.parent)
    on_path = shutil.which("vmplane", path=rest)
    if on_path and Path(on_path) != script:
        launchers.append((f"vmplane on PATH {on_path}", [on_path]))

    print(f"# start-up, {args.runs} runs each (seconds): median / min / max")
    floor = wall([sys.executable, "-c", "pass"], args.runs)
    print(f"{'python -c pass (interpreter floor)':64} {statistics.median(floor):.3f} {min(floor):.3f} {max(floor):.3f}")
    product: dict[str, float] = {}
    for label, base in launchers:
        for name, cli_args in (("--help", help_args), ("validate", validate_args), ("cost", cost_args)):
            ts = wall([*base, *cli_args], args.runs)
            product.setdefault(name, statistics.median(ts))  # the first launcher is the product number
            print(f"{label + ' ' + name:64} {statistics.median(ts):.3f} {min(ts):.3f} {max(ts):.3f}")
    for name, med in product.items():
        verdict = "MET" if med < TARGET_S else "NOT MET"
        print(f"target: python -m vmplane {name} < {TARGET_S} s -> {verdict} ({med:.3f} s)")

    rows = importtime(validate_args)
    print(f"\n# python -X importtime -m vmplane {' '.join(validate_args)}: top 10 by cumulative (ms)")
    for self_us, cum_us, name in sorted(rows, key=lambda r: -r[1])[:10]:
        print(f"{cum_us / 1000:8.1f} {self_us / 1000:8.1f}  {name}")
    by_pkg: dict[str, int] = defaultdict(int)
    for self_us, _, name in rows:
        by_pkg[name.strip().split(".")[0]] += self_us
    print(f"# self time by top-level package (ms), top 10 of {sum(by_pkg.values()) / 1000:.0f} ms total")
    for pkg, us in sorted(by_pkg.items(), key=lambda kv: -kv[1])[:10]:
        print(f"{us / 1000:8.1f}  {pkg}")

    print("\n# heavy modules in sys.modules (fresh interpreter each)")
    bad = False
    for label, cli_args in (("import the CLI module", []), ("+ --help", help_args), ("+ validate", validate_args)):
        code, mods = probe(cli_args)
        heavy = [m for m in HEAVY if m in mods]
        bad = bad or bool(heavy)
        other = [m for m in OTHER if m in mods]
        exit_note = "" if code is None else f" (exit {code})"
        print(f"{label + exit_note:32} heavy: {', '.join(heavy) or 'none'}; also loaded: {', '.join(other)}")
    print("heavy-import check:", "FAILED" if bad else "ok (none of " + ", ".join(HEAVY) + ")")
    if not args.no_sandbox:
        with_jobs(Path(args.example), args.runs, args.apply_runs)
    return 1 if bad else 0


def _copy(example: Path, name: str, into: Path) -> Path:
    """The example under another name: each copy is its own environment (and job) in one sandbox."""
    from vmplane.envspec.load import load_spec

    spec = load_spec(example).model_dump(mode="json", by_alias=True, exclude_none=True)
    spec["name"] = name
    if "loadBalancer" in spec:
        spec["loadBalancer"]["domain"] = f"{name}.sandbox.vmplane.test"
    path = into / f"{name}.jsonc"
    path.write_text(json.dumps(spec, indent=2))
    return path


def with_jobs(example: Path, runs: int, apply_runs: int) -> None:
    """Read-only commands against a DB with a few jobs, then apply/destroy process overhead."""
    import tempfile

    from apply_sandbox import BenchError, free_port, phase, run_cli, stop_sandbox

    with tempfile.TemporaryDirectory(prefix="vmplane-startup-") as home:
        env = {**os.environ, "VMPLANE_HOME": home, "VMPLANE_SANDBOX_PORT": str(free_port()), "COLUMNS": "200"}
        try:
            _, proc = run_cli(["sandbox", "start"], env)
            if proc.returncode != 0:
                raise BenchError(f"sandbox start failed ({proc.returncode}): {proc.stderr or proc.stdout}")
            files = [_copy(example, f"bench-{i}", Path(home)) for i in range(3)]
            for f in files:
                phase("apply", f, env)  # three jobs (and environments) in the DB
            print(f"\n# read-only commands, {runs} runs each, DB with {len(files)} jobs (seconds): median / min / max")
            base = [sys.executable, "-m", "vmplane"]
            worst = 0.0
            for cmd in (["status", "bench-0"], ["jobs"], ["envs"]):
                for extra in ([], ["--output", "json"]):
                    ts = wall([*base, *cmd, *extra], runs, env)
                    worst = max(worst, statistics.median(ts))
                    label = "python -m vmplane " + " ".join([*cmd, *extra])
                    print(f"{label:64} {statistics.median(ts):.3f} {min(ts):.3f} {max(ts):.3f}")
            verdict = "MET" if worst <= TARGET_READ_S else "NOT MET"
            print(f"target: every read-only command <= {TARGET_READ_S} s -> {verdict} (slowest median {worst:.3f} s)")
            rows = importtime(["jobs"], env)
            print("\n# python -X importtime -m vmplane jobs: top 10 by cumulative (ms)")
            for self_us, cum_us, name in sorted(rows, key=lambda r: -r[1])[:10]:
                print(f"{cum_us / 1000:8.1f} {self_us / 1000:8.1f}  {name}")
            _, mods = probe(["jobs"], env)
            print(
                "heavy modules loaded by `jobs`:",
                ", ".join(m for m in (*HEAVY, "rich", "fastapi") if m in mods) or "none",
            )

            if apply_runs < 1:
                return
            print(f"\n# apply/destroy of {example}, {apply_runs} runs: wall - sum of step durations (seconds)")
            over: dict[str, list[float]] = {"apply": [], "destroy": []}
            for _ in range(apply_runs):
                for kind in ("apply", "destroy"):
                    p = phase(kind, example, env)
                    over[kind].append(p.wall - p.step_sum)
            for kind, xs in over.items():
                med = statistics.median(xs)
                verdict = "MET" if med <= TARGET_OVERHEAD_S else "NOT MET"
                print(f"{kind + ' overhead':64} {med:.3f} {min(xs):.3f} {max(xs):.3f}")
                print(f"target: {kind} overhead <= {TARGET_OVERHEAD_S} s -> {verdict} ({med:.3f} s)")
        finally:
            stop_sandbox(env)


if __name__ == "__main__":
    sys.exit(main())
