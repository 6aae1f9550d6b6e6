"""Throughput of the provisioning API with 1, 2 and 4 workers on PostgreSQL, and GET latency under load.

For each worker count: a fresh throwaway PostgreSQL cluster and a reset sandbox, `vmplane serve
--no-worker` plus N `vmplane worker` processes, then ENVS environments (examples/fixed.jsonc under new
names) POSTed by 10 concurrent clients; environments per minute until every job has ended, failures with
their errors, each job's time to done (POST -> succeeded), its queue wait and run time, and the most jobs
running at once. Then CLIENTS concurrent clients GET random jobs for a few seconds: p50/p99 latency.
`--destroy` then DELETEs them all and reports the same for the teardown.

`--sim`: the API and every worker talk to the sandbox through bench/cloud_sim.py (its own process, one
per worker count: per-call latency, slow resources held pending for their real durations x factor), so
jobs wait on the cloud rather than on the CPU; the proxy's log gives the calls, the answers kept pending
and moto's answer times. Every phase also records the CPU each process role used and PostgreSQL's
connections (bench/scale_probe.py).

    python bench/api_scale.py [--envs 50] [--workers 1 2 4] [--clients 8] [--get-seconds 5] [--destroy]
                              [--sim [--latency-ms 50] [--factor 0.1]] [--json-out FILE] [--keep-logs DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import scale_probe
from apply_sandbox import VMPLANE, BenchError, free_port, phase, sandbox_env, start_sandbox, stop_sandbox

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.helpers import start_postgres  # noqa: E402

EXAMPLE = REPO / "examples" / "fixed.jsonc"
PHASE_TIMEOUT_S = 900.0
DONE = {"apply": ("succeeded", "failed"), "destroy": ("deleted", "delete_failed")}


def spec(i: int) -> dict[str, object]:
    from vmplane.envspec.load import load_spec

    doc = load_spec(EXAMPLE).model_dump(mode="json", by_alias=True, exclude_none=True)
    doc.update(name=f"bench-{i}", org="acme")
    return doc


def _epoch(value: str | None) -> float | None:
    return datetime.fromisoformat(value).timestamp() if value else None


def _pct(xs: list[float], q: float) -> float | None:
    return round(scale_probe.pct(xs, q), 1) if xs else None


def all_jobs(api: httpx.Client) -> dict[str, dict[str, Any]]:
    """Every job of the org, through the list endpoint (one request per 100 jobs, not one per job)."""
    out: dict[str, dict[str, Any]] = {}
    page: str | None = "/provisioning-jobs?limit=100&offset=0"
    while page:
        body = api.get(page).json()
        out |= {j["id"]: j for j in body["items"]}
        page = body["next"]
    return out


def run_phase(kind: str, api: httpx.Client, items: list[Any], send: Callable[[Any], httpx.Response]) -> dict[str, Any]:
    """Send one request per item (10 at a time), then poll until each job is done; the jobs' numbers."""
    asked: dict[str, float] = {}
    errors: list[str] = []
    lock = threading.Lock()

    def one(item: Any) -> None:
        t = time.time()
        r = send(item)
        with lock:
            if r.status_code in (201, 202):
                asked[r.json()["id"]] = t
            else:
                errors.append(f"{kind} request for {item}: HTTP {r.status_code} {r.text[:300]}")

    t0 = time.time()
    with ThreadPoolExecutor(10) as pool:
        list(pool.map(one, items))
    sent = time.time() - t0
    jobs: dict[str, dict[str, Any]] = {}
    while time.time() - t0 < PHASE_TIMEOUT_S:
        jobs = {i: j for i, j in all_jobs(api).items() if i in asked}
        if all(j["status"] in DONE[kind] for j in jobs.values()):
            break
        time.sleep(1.0)
    key = "steps" if kind == "apply" else "teardownSteps"
    ok, done, queue, run, spans = 0, [], [], [], []
    for job_id, j in sorted(jobs.items(), key=lambda kv: kv[1]["env"]):
        steps = [s for s in j[key] if s["startedAt"]]
        first = _epoch(steps[0]["startedAt"]) if steps else None
        end = _epoch(j["updatedAt"])
        if j["status"] == DONE[kind][0] and first is not None and end is not None:
            ok += 1
            done.append(end - asked[job_id])
            queue.append(first - asked[job_id])
            run.append(end - first)
            spans.append((first, end))
        else:
            failed = [f"{s['name']}: {s['error']}" for s in j[key] if s["status"] == "failed"]
            errors.append(f"{j['env']} {j['status']}: {j['error'] or '; '.join(failed) or '(no error recorded)'}")
    if len(jobs) < len(asked):
        errors.append(f"{len(asked) - len(jobs)} jobs not listed")
    last = max((e for _, e in spans), default=time.time())
    wall = last - t0
    return {
        "kind": kind,
        "ok": ok,
        "failed": len(items) - ok,
        "wallS": round(wall, 1),
        "sendS": round(sent, 1),
        "envsPerMin": round(60 * ok / wall, 1) if wall > 0 else 0.0,
        "doneP50S": _pct(done, 0.5),
        "doneP95S": _pct(done, 0.95),
        "queueP50S": _pct(queue, 0.5),
        "runP50S": _pct(run, 0.5),
        "runP95S": _pct(run, 0.95),
        "peakRunning": scale_probe.peak(spans),
        "errors": errors,
        "ids": list(asked),
        "start": t0,
        "end": last,
    }


def get_latency(api: httpx.Client, ids: list[str], clients: int, seconds: float) -> dict[str, Any]:
    latencies: list[float] = []
    lock = threading.Lock()
    deadline = time.perf_counter() + seconds

    def client() -> None:
        with httpx.Client(base_url=api.base_url, headers=api.headers, timeout=30) as c:
            while time.perf_counter() < deadline:
                t = time.perf_counter()
                r = c.get(f"/provisioning-jobs/{random.choice(ids)}")
                if r.status_code == 200:
                    with lock:
                        latencies.append(time.perf_counter() - t)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if not latencies:
        return {"gets": 0}
    latencies.sort()
    return {
        "gets": len(latencies),
        "getP50Ms": round(1000 * statistics.median(latencies), 1),
        "getP99Ms": round(1000 * latencies[int(0.99 * (len(latencies) - 1))], 1),
    }


def start_proxy(moto_port: str, args: argparse.Namespace, log: Path, out: Path) -> tuple[subprocess.Popen[bytes], int]:
    """bench/cloud_sim.py in its own process (its own GIL), in front of moto; waits until it answers."""
    port = free_port()
    cmd = [sys.executable, str(Path(__file__).with_name("cloud_sim.py")), "--upstream", f"http://127.0.0.1:{moto_port}"]
    cmd += ["--port", str(port), "--latency-ms", str(args.latency_ms), "--factor", str(args.factor), "--log", str(log)]
    proc = subprocess.Popen(cmd, stdout=out.open("wb"), stderr=subprocess.STDOUT)
    for _ in range(100):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/moto-api/", timeout=2).status_code == 200:
                return proc, port
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise BenchError(f"cloud_sim did not answer on :{port}; see {out}")


def one_config(workers: int, args: argparse.Namespace, sb_env: dict[str, str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="vmplane-bench-api-") as tmp:
        base = Path(tmp)
        url, stop = start_postgres(base / "pg")
        if url is None:
            raise SystemExit(f"cannot start PostgreSQL: {stop}")
        env = {**sb_env, "VMPLANE_DATABASE_URL": url}
        procs: dict[str, list[subprocess.Popen[bytes]]] = {"proxy": [], "api": [], "workers": []}
        calls_log = base / "calls.jsonl"
        try:
            subprocess.run([*VMPLANE, "sandbox", "reset"], env=env, check=True, capture_output=True)
            for kind in ("apply", "destroy"):  # unmeasured, straight to moto: it reloads its catalogues after a reset
                phase(kind, EXAMPLE, sb_env)
            if args.sim:
                proxy, proxy_port = start_proxy(sb_env["VMPLANE_SANDBOX_PORT"], args, calls_log, base / "proxy.log")
                procs["proxy"].append(proxy)
                env["VMPLANE_SANDBOX_PORT"] = str(proxy_port)  # the API writes it into each job's target
            create = [*VMPLANE, "tokens", "create", "--org", "acme", "--role", "admin", "--output", "json"]
            token = json.loads(subprocess.run(create, env=env, check=True, capture_output=True, text=True).stdout)
            port = free_port()
            log = (base / "api.log").open("wb")
            serve = [*VMPLANE, "serve", "--port", str(port), "--no-worker"]
            procs["api"].append(subprocess.Popen(serve, env=env, stdout=log, stderr=log))
            for n in range(workers):
                wlog = (base / f"worker-{n}.log").open("wb")
                worker = [*VMPLANE, "worker", "--heartbeat", "1"]
                procs["workers"].append(subprocess.Popen(worker, env=env, stdout=wlog, stderr=wlog))
            auth = {"Authorization": f"Bearer {token['token']}"}
            api = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=auth, timeout=120)
            while True:
                try:
                    if api.get("/healthz").status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.2)
            time.sleep(2)  # let the workers launch

            moto = json.loads((Path(sb_env["VMPLANE_HOME"]) / "sandbox.json").read_text())["pid"]
            roles = {"moto": [moto], "postgres": [scale_probe.postmaster_pid(base / "pg" / "data") or -1]}
            roles |= {r: [p.pid for p in ps] for r, ps in procs.items()}

            def measured(kind: str, items: list[Any], send: Callable[[Any], httpx.Response]) -> dict[str, Any]:
                with scale_probe.Sampler(url) as samp, scale_probe.CpuWindow(roles) as cpu:
                    res = run_phase(kind, api, items, send)
                assert cpu.usage is not None
                res["cpu"] = cpu.usage.to_json()
                res["load1Mean"] = round(statistics.mean(samp.loads), 2) if samp.loads else None
                res["pgConnsMax"] = max(samp.conns, default=0)
                if args.sim:
                    res["proxy"] = scale_probe.proxy_calls(calls_log, res["start"], res["end"], args.latency_ms / 1e3)
                print(f"# {workers} worker(s) {kind}: {summary(res)}", file=sys.stderr, flush=True)
                return res

            post = lambda i: api.post("/provisioning-jobs", params={"sandbox": "true"}, json=spec(i))  # noqa: E731
            row: dict[str, Any] = {
                "workers": workers,
                "envs": args.envs,
                "apply": measured("apply", list(range(args.envs)), post),
            }
            ids = row["apply"]["ids"]
            row |= get_latency(api, ids, args.clients, args.get_seconds) if ids else {"gets": 0}
            if args.destroy:
                row["destroy"] = measured("destroy", ids, lambda job_id: api.delete(f"/provisioning-jobs/{job_id}"))
            return row
        finally:
            for p in [p for ps in procs.values() for p in ps]:
                p.terminate()
            for p in [p for ps in procs.values() for p in ps]:
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
            subprocess.run(stop, capture_output=True, check=False)
            if args.keep_logs:
                dest = args.keep_logs / f"workers-{workers}"
                shutil.rmtree(dest, ignore_errors=True)
                shutil.copytree(base, dest, ignore=shutil.ignore_patterns("pg"))


def summary(res: dict[str, Any]) -> str:
    return f"{res['ok']} ok, {res['failed']} failed, {res['wallS']} s, {res['envsPerMin']} envs/min"


def _cell(value: object) -> str:
    return "-" if value is None else str(value)


def report(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    how = f"through cloud_sim (latency {args.latency_ms:.0f} ms, factor {args.factor})" if args.sim else "on moto"
    out = [f"# {args.envs} environments ({EXAMPLE.name}) through the API on PostgreSQL, {how}"]
    for kind in ("apply", "destroy"):
        phased = [r for r in rows if kind in r]
        if not phased:
            continue
        head = ["workers", "ok", "failed", "wall s", "env/min", "done p50", "done p95", "queue p50", "run p50"]
        head += ["run p95", "peak run", "calls", "kept", "up p50ms", "up p95ms", "inflight", "pg conns", "load1 avg"]
        out += ["", f"## {kind}", " ".join(f"{h:>9}" for h in head)]
        for r in phased:
            p = r[kind]
            px = p.get("proxy", {})
            cells = [r["workers"], p["ok"], p["failed"], p["wallS"], p["envsPerMin"], p["doneP50S"], p["doneP95S"]]
            cells += [p["queueP50S"], p["runP50S"], p["runP95S"], p["peakRunning"], px.get("calls"), px.get("kept")]
            cells += [px.get("upstreamP50Ms"), px.get("upstreamP95Ms"), px.get("inFlightMean"), p["pgConnsMax"]]
            cells += [p["load1Mean"]]
            out.append(" ".join(f"{_cell(c):>9}" for c in cells))
        out += ["", f"CPU during {kind}, average cores busy (machine: all processes, 2 cores = 2.0)"]
        roles = ["moto", "proxy", "postgres", "api", "workers", "bench"]
        out.append(" ".join(f"{h:>9}" for h in ["workers", *roles, "machine"]))
        for r in phased:
            c = r[kind]["cpu"]
            out.append(
                " ".join(f"{_cell(x):>9}" for x in [r["workers"], *(c["cores"].get(k) for k in roles)])
                + f" {c['machineCores']:>9}"
            )
    if any("gets" in r for r in rows):
        out += ["", f"GET /provisioning-jobs/ID, {args.clients} clients, {args.get_seconds:.0f} s after the applies"]
        out += [
            f"  {r['workers']} worker(s): {r['gets']} GETs, p50 {r.get('getP50Ms')} ms, p99 {r.get('getP99Ms')} ms"
            for r in rows
        ]
    errs = [(r["workers"], k, e) for r in rows for k in ("apply", "destroy") if k in r for e in r[k]["errors"]]
    out += ["", f"failures: {len(errs)}" + ("" if errs else " (none)")]
    out += [f"  {w} worker(s) {k}: {e}" for w, k, e in errs]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--envs", type=int, default=50)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--get-seconds", type=float, default=5.0)
    ap.add_argument("--destroy", action="store_true", help="then DELETE every environment and measure that too")
    ap.add_argument("--sim", action="store_true", help="through bench/cloud_sim.py (a slow cloud)")
    ap.add_argument("--latency-ms", type=float, default=50.0)
    ap.add_argument("--factor", type=float, default=0.1)
    ap.add_argument("--json-out", type=Path)
    ap.add_argument("--keep-logs", type=Path, help="copy each config's logs (API, workers, proxy calls) here")
    args = ap.parse_args(argv)
    if args.keep_logs:
        args.keep_logs.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="vmplane-bench-home-") as home:
        sb_env = sandbox_env(home)
        start_sandbox(sb_env)
        try:
            for n in args.workers:
                rows.append(one_config(n, args, sb_env))
        finally:
            stop_sandbox(sb_env)
            if args.keep_logs and (Path(home) / "sandbox.log").exists():
                shutil.copy(Path(home) / "sandbox.log", args.keep_logs / "sandbox.log")  # moto's own errors
    print(report(rows, args))
    if args.json_out:
        args.json_out.write_text(
            json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows}, indent=2)
        )
    return 0 if all(r[k]["failed"] == 0 for r in rows for k in ("apply", "destroy") if k in r) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as err:
        print(f"FAILED: {err}", file=sys.stderr)
        sys.exit(1)
