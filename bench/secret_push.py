"""What secrets by reference (issue 26) cost the runtime push: the script's size against the exec
channel's limit, and the time to render it, for 0 to N references on AWS and Google Cloud.

The script carries the VM-side fetcher (gzip+base64) and a references-only plan, so its size grows with
the number of references, not with the secrets' values: the limit is a count of references. No cloud,
no sandbox: the sources are the real clouds' endpoints, as a VM would be sent them.

    python bench/secret_push.py [--refs 0,1,10,100] [--repeat 50] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from vmplane.bootstrap.runtime import render_push_script
from vmplane.clouds.aws.capabilities import EXEC_SCRIPT_BYTES
from vmplane.envspec.load import load_spec

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = {"aws": ROOT / "examples" / "fixed.jsonc", "gcp": ROOT / "examples" / "gcp-fixed.jsonc"}
SOURCES: dict[str, dict[str, Any]] = {
    "aws": {
        "cloud": "aws",
        "region": "us-east-1",
        "endpoints": {
            "imds": "http://169.254.169.254",
            "secretsmanager": "https://secretsmanager.us-east-1.amazonaws.com",
            "ssm": "https://ssm.us-east-1.amazonaws.com",
        },
    },
    "gcp": {
        "cloud": "gcp",
        "project": "acme-prod-1234",
        "endpoints": {
            "metadata": "http://metadata.google.internal",
            "secretmanager": "https://secretmanager.googleapis.com",
        },
    },
}


def ref(cloud: str, i: int) -> str:
    """A reference of typical length (a path-like name, and on AWS a JSON key on every other one)."""
    if cloud == "gcp":
        return f"gcp-sm:prod-app-secret-{i:03d}"
    return f"aws-sm:prod/app/secret-{i:03d}#password" if i % 2 else f"aws-ssm:/prod/app/secret-{i:03d}"


def measure(cloud: str, n: int, repeat: int) -> dict[str, Any]:
    spec = load_spec(EXAMPLES[cloud])
    env = {f"SECRET_{i:03d}": {"secret": ref(cloud, i)} for i in range(n)}
    doc = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    doc["runtime"] = {"env": {"LOG_LEVEL": "info", **env}}
    spec = type(spec).model_validate(doc)
    versions = {ref(cloud, i): f"v{i}" for i in range(n)}
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        script = render_push_script(spec, source=SOURCES[cloud] if n else None, versions=versions or None)
        times.append(time.perf_counter() - start)
    size = len(script.encode())
    return {
        "cloud": cloud,
        "refs": n,
        "bytes": size,
        "limitBytes": EXEC_SCRIPT_BYTES,
        "share": round(size / EXEC_SCRIPT_BYTES, 3),
        "renderMs": round(statistics.median(times) * 1000, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--refs", default="0,1,10,100", help="comma-separated reference counts")
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args()
    rows = [measure(c, int(n), args.repeat) for c in ("aws", "gcp") for n in args.refs.split(",")]
    print(f"{'cloud':5} {'refs':>5} {'bytes':>7} {'of limit':>9} {'render ms':>10}")
    for r in rows:
        print(f"{r['cloud']:5} {r['refs']:>5} {r['bytes']:>7} {r['share']:>9.1%} {r['renderMs']:>10.3f}")
    per_ref = {
        c: (rs[-1]["bytes"] - rs[1]["bytes"]) / (rs[-1]["refs"] - rs[1]["refs"])
        for c in ("aws", "gcp")
        if len(rs := [r for r in rows if r["cloud"] == c and r["refs"]]) > 1
    }
    for c, b in per_ref.items():
        first = next(r for r in rows if r["cloud"] == c and r["refs"])
        fit = first["refs"] + int((EXEC_SCRIPT_BYTES - first["bytes"]) // b)
        print(f"{c}: {b:.0f} B per reference; about {fit} references fit in {EXEC_SCRIPT_BYTES} B")
    if args.json_out:
        args.json_out.write_text(json.dumps({"rows": rows, "bytesPerRef": per_ref}, indent=2))


if __name__ == "__main__":
    main()
