"""What the AWS sandbox's strict layer (issue 25) adds per request: parse + model check + catalogue.

Serves the sandbox in this process (the AWS app of `vmplane.sandbox.serve`, with a recording wrapper
outside the strict layer, and the Google Cloud sandbox) on free ports, runs the real CLI's
`vmplane apply` and `destroy` of the example against it, then replays every recorded AWS request through
the layer's parse and checks alone, REPEAT times each (moto is not called): per request the median, and
over the whole apply+destroy the sum, next to the time the sandbox took to answer the same requests.

    python bench/strict_layer.py [--example examples/web.jsonc] [--repeat 20] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

VMPLANE = [sys.executable, "-m", "vmplane"]
Recorded = tuple[dict[str, Any], bytes, float]  # environ (strings only), body, seconds to answer


def recorder(into: list[Recorded]) -> Callable[[Any], Any]:
    def wrap(app: Any) -> Any:
        def record(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            stream = environ["wsgi.input"]
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = stream.read() if environ.get("wsgi.input_terminated") else stream.read(length) if length else b""
            environ["wsgi.input"] = io.BytesIO(body)
            t0 = time.perf_counter()
            out = list(app(environ, start_response))
            into.append(({k: v for k, v in environ.items() if isinstance(v, str)}, body, time.perf_counter() - t0))
            return out

        return record

    return wrap


def run(kind: str, example: Path, env: dict[str, str]) -> None:
    proc = subprocess.run(
        [*VMPLANE, kind, "-f", str(example), "--sandbox", "--yes", "--output", "json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    want = "succeeded" if kind == "apply" else "deleted"
    status = json.loads(proc.stdout or "{}").get("status")
    if status != want:
        raise SystemExit(f"{kind} ended {status!r}:\n{proc.stderr[-2000:]}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--example", type=Path, default=Path("examples/web.jsonc"))
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args(argv)
    os.environ["MOTO_IAM_LOAD_MANAGED_POLICIES"] = "true"  # as serve.py
    os.environ["MOTO_ACM_VALIDATION_WAIT"] = "0"
    from moto.moto_server.werkzeug_app import MotoRequestHandler
    from werkzeug.serving import make_server

    from vmplane.sandbox.aws import app as strict
    from vmplane.sandbox.aws import request
    from vmplane.sandbox.gcp.server import GcpSandbox
    from vmplane.sandbox.seed import seed

    logging.getLogger("werkzeug").setLevel(logging.WARNING)

    recorded: list[Recorded] = []
    served = strict.build_app([recorder(recorded)])
    server = make_server("127.0.0.1", 0, served, threaded=True, request_handler=MotoRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    gcp = GcpSandbox(0)
    gcp.start()
    seed(f"http://127.0.0.1:{server.server_port}")
    with tempfile.TemporaryDirectory(prefix="bench-strict-") as home:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "VMPLANE_"))},
            "VMPLANE_HOME": home,
            "VMPLANE_SANDBOX_PORT": str(server.server_port),
            "VMPLANE_GCP_SANDBOX_PORT": str(gcp.port),
        }
        t0 = time.perf_counter()
        run("apply", args.example, env)
        run("destroy", args.example, env)
        wall = time.perf_counter() - t0
    with urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}{strict.STATUS_PATH}", timeout=30) as r:
        live = json.loads(r.read())  # what the layer refused while the CLI ran (the catalogue saw live state)
    server.shutdown()
    gcp.stop()
    layer = strict.StrictLayer(lambda e, s: [], strict._catalogue())
    per_service: dict[str, list[float]] = defaultdict(list)
    medians, unplaced, answered = [], 0, 0.0
    slowest: list[tuple[float, str, int]] = []
    refused: list[str] = []  # a vmplane request the layer refuses: a driver bug or a parse bug
    for environ, body, seconds in recorded:
        answered += seconds
        if environ.get("PATH_INFO", "").startswith(("/moto-api", strict.STATUS_PATH)):
            continue
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            parsed = request.parse(environ, body)
            if parsed is not None:
                fault, rule = layer.refusal(parsed)
                if fault is not None and not times:
                    refused.append(f"{parsed.request.operation}: {rule} {fault.code} {fault.message[:200]}")
            times.append(time.perf_counter() - t)
        if parsed is None:
            unplaced += 1
            continue
        medians.append(statistics.median(times))
        per_service[parsed.request.service].append(medians[-1])
        slowest.append((medians[-1], f"{parsed.request.service}.{parsed.request.operation}", len(body)))
    ordered = sorted(medians)
    result = {
        "example": str(args.example),
        "requests": len(recorded),
        "checked": len(medians),
        "unplaced": unplaced,
        "apply_destroy_wall_s": round(wall, 2),
        "sandbox_answer_total_s": round(answered, 3),
        "strict_total_ms": round(sum(medians) * 1000, 2),
        "per_request_us": {
            "median": round(statistics.median(ordered) * 1e6, 1),
            "p95": round(ordered[int(len(ordered) * 0.95)] * 1e6, 1),
            "max": round(ordered[-1] * 1e6, 1),
        },
        "by_service_median_us": {s: round(statistics.median(v) * 1e6, 1) for s, v in sorted(per_service.items())},
        "by_service_requests": {s: len(v) for s, v in sorted(per_service.items())},
        "refused": refused,
        "live_refusals": live["refusals"],
        "live_checked": live["checked"],
        "slowest_us": [(op, round(t * 1e6, 1), f"{n} bytes") for t, op, n in sorted(slowest, reverse=True)[:5]],
    }
    print(json.dumps(result, indent=2))
    if refused:
        print(f"{len(refused)} vmplane requests refused", file=sys.stderr)
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2))
    return 1 if refused or live["refusals"] else 0


if __name__ == "__main__":
    sys.exit(main())
