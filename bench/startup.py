"""Start-up cost of `vmplane --help` and `vmplane validate`, and which heavy modules they import.

    python bench/startup.py [--runs 10] [--example examples/fixed.jsonc]

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

# Run in a fresh interpreter: import the CLI, optionally invoke it in-process, report loaded modules.
PROBE = """
import json, sys
from vmplane.cli.app import app
args = json.loads(sys.argv[1])
code = None
if args:
    from typer.testing import CliRunner
    code = CliRunner().invoke(app, args).exit_code
names = {m.split(".")[0] for m in sys.modules}
print(json.dumps({"exit": code, "modules": sorted(names)}))
"""


def wall(cmd: Sequence[str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
        times.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            raise SystemExit(f"FAILED: {' '.join(cmd)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return times


def importtime(args: Sequence[str]) -> list[tuple[int, int, str]]:
    """(self µs, cumulative µs, indented name) for each import of `python -X importtime -m vmplane ARGS`."""
    cmd = [sys.executable, "-X", "importtime", "-m", "vmplane", *args]
    err = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True).stderr
    rows = []
    for line in err.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) == 3 and parts[0].strip().isdigit():
            rows.append((int(parts[0]), int(parts[1]), parts[2].rstrip()))
    return rows


def probe(args: Sequence[str]) -> tuple[int | None, set[str]]:
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(list(args))], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"FAILED: probe {args}: {out.stderr[-2000:]}")
    data = json.loads(out.stdout.strip().splitlines()[-1])
    return data["exit"], set(data["modules"])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--example", default="examples/fixed.jsonc")
    args = ap.parse_args(argv)
    help_args, validate_args = ["--help"], ["validate", "-f", args.example]

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
        for name, cli_args in (("--help", help_args), ("validate", validate_args)):
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
    for label, cli_args in (("import vmplane.cli.app", []), ("+ --help", help_args), ("+ validate", validate_args)):
        code, mods = probe(cli_args)
        heavy = [m for m in HEAVY if m in mods]
        bad = bad or bool(heavy)
        other = [m for m in OTHER if m in mods]
        exit_note = "" if code is None else f" (exit {code})"
        print(f"{label + exit_note:32} heavy: {', '.join(heavy) or 'none'}; also loaded: {', '.join(other)}")
    print("heavy-import check:", "FAILED" if bad else "ok (none of " + ", ".join(HEAVY) + ")")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
