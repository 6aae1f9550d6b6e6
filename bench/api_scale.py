"""Throughput of the provisioning API with 1, 2 and 4 workers on PostgreSQL, and GET latency under load.

For each worker count: a fresh throwaway PostgreSQL cluster and a reset sandbox, `vmplane serve
--no-worker` plus N `vmplane worker` processes, then ENVS environments (examples/fixed.jsonc under new
names) POSTed by 10 concurrent clients; the wall time until every job has ended, and how many failed.
Then CLIENTS concurrent clients GET random jobs for a few seconds: p50/p99 latency.

    python bench/api_scale.py [--envs 50] [--workers 1 2 4] [--clients 8] [--get-seconds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.helpers import free_port, start_postgres  # noqa: E402

VMPLANE = [sys.executable, "-m", "vmplane"]


def spec(i: int) -> dict[str, object]:
    from vmplane.envspec.load import load_spec

    doc = load_spec(REPO / "examples" / "fixed.jsonc").model_dump(mode="json", by_alias=True, exclude_none=True)
    doc.update(name=f"bench-{i}", org="acme")
    return doc


def one_config(
    workers: int, envs: int, clients: int, get_seconds: float, sandbox_env: dict[str, str]
) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="vmplane-bench-api-") as tmp:
        base = Path(tmp)
        url, stop = start_postgres(base / "pg")
        if url is None:
            raise SystemExit(f"cannot start PostgreSQL: {stop}")
        env = {**sandbox_env, "VMPLANE_DATABASE_URL": url}
        procs: list[subprocess.Popen[bytes]] = []
        try:
            subprocess.run([*VMPLANE, "sandbox", "reset"], env=env, check=True, capture_output=True)
            token = json.loads(
                subprocess.run(
                    [*VMPLANE, "tokens", "create", "--org", "acme", "--role", "admin", "--output", "json"],
                    env=env,
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
            )["token"]
            port = free_port()
            log = (base / "api.log").open("wb")
            procs.append(
                subprocess.Popen(
                    [*VMPLANE, "serve", "--port", str(port), "--no-worker"], env=env, stdout=log, stderr=log
                )
            )
            for n in range(workers):
                wlog = (base / f"worker-{n}.log").open("wb")
                procs.append(
                    subprocess.Popen([*VMPLANE, "worker", "--heartbeat", "1"], env=env, stdout=wlog, stderr=wlog)
                )
            api = httpx.Client(
                base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}, timeout=120
            )
            while True:
                try:
                    if api.get("/healthz").status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.2)
            time.sleep(2)  # let the workers launch

            t0 = time.perf_counter()
            with ThreadPoolExecutor(10) as pool:
                created = list(
                    pool.map(
                        lambda i: api.post("/provisioning-jobs", params={"sandbox": "true"}, json=spec(i)), range(envs)
                    )
                )
            ids = [r.json()["id"] for r in created if r.status_code == 201]
            post_errors = sum(1 for r in created if r.status_code != 201)
            pending = set(ids)
            statuses: dict[str, str] = {}
            while pending:
                for job_id in list(pending):
                    st = api.get(f"/provisioning-jobs/{job_id}").json()["status"]
                    if st in ("succeeded", "failed"):
                        statuses[job_id] = st
                        pending.discard(job_id)
                if time.perf_counter() - t0 > 900:
                    break
                time.sleep(0.5)
            wall = time.perf_counter() - t0
            failed = sum(1 for s in statuses.values() if s == "failed") + len(pending) + post_errors
            errors = [api.get(f"/provisioning-jobs/{j}").json()["error"] for j, s in statuses.items() if s == "failed"]
            errors += [r.text[:300] for r in created if r.status_code != 201]

            latencies: list[float] = []
            lock = threading.Lock()
            deadline = time.perf_counter() + get_seconds

            def client() -> None:
                c = httpx.Client(base_url=api.base_url, headers=api.headers, timeout=30)
                while time.perf_counter() < deadline:
                    t = time.perf_counter()
                    r = c.get(f"/provisioning-jobs/{random.choice(ids)}")
                    dt = time.perf_counter() - t
                    if r.status_code == 200:
                        with lock:
                            latencies.append(dt)

            threads = [threading.Thread(target=client) for _ in range(clients)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            latencies.sort()
            return {
                "workers": workers,
                "envs": envs,
                "wall_s": round(wall, 1),
                "failed": failed,
                "gets": len(latencies),
                "get_p50_ms": round(1000 * statistics.median(latencies), 1),
                "get_p99_ms": round(1000 * latencies[int(0.99 * (len(latencies) - 1))], 1),
                "errors": errors,
            }
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
            subprocess.run(stop, capture_output=True, check=False)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--envs", type=int, default=50)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--get-seconds", type=float, default=5.0)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="vmplane-bench-home-") as home:
        sandbox_env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "VMPLANE_"))},
            "VMPLANE_HOME": home,
            "VMPLANE_SANDBOX_PORT": str(free_port()),
        }
        subprocess.run([*VMPLANE, "sandbox", "start"], env=sandbox_env, check=True, capture_output=True)
        try:
            rows = []
            for n in args.workers:
                row = one_config(n, args.envs, args.clients, args.get_seconds, sandbox_env)
                print(json.dumps(row), file=sys.stderr, flush=True)
                rows.append(row)
        finally:
            subprocess.run([*VMPLANE, "sandbox", "stop"], env=sandbox_env, capture_output=True, check=False)
    print(f"# {args.envs} sandbox environments through the API on PostgreSQL ({args.clients} GET clients)")
    print(f"{'workers':>7} {'wall s':>7} {'failed':>6} {'GETs':>6} {'p50 ms':>7} {'p99 ms':>7}")
    for r in rows:
        cells = (r["workers"], r["wall_s"], r["failed"], r["gets"], r["get_p50_ms"], r["get_p99_ms"])
        print("{:>7} {:>7} {:>6} {:>6} {:>7} {:>7}".format(*cells))
    return 0 if all(r["failed"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
