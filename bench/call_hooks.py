"""The cost per AWS API call of vmplane's botocore hooks (issue 13: metrics, logs, traces), in-process.

Runs the hooks one call goes through (before-call, one needs-retry, after-call) on stand-in objects, N
times, and prints microseconds per call: main's before-call hook alone (name + step tally) for
reference, all hooks with tracing off (the default), and with a tracer provider installed (no exporter).

    python bench/call_hooks.py [--calls 200000]
"""

from __future__ import annotations

import argparse
import timeit
from types import SimpleNamespace as NS

from opentelemetry.sdk.trace import TracerProvider

from vmplane.clouds.aws import session
from vmplane.clouds.base import count_call
from vmplane.observe import tracing

MODEL = NS(name="DescribeVpcs", service_model=NS(endpoint_prefix="ec2"))
HTTP = NS(status_code=200)
# The hooks are the clients' methods (each hands the call to its target's transport); nothing is sent.
CLIENTS = session.AwsClients(session.AwsTarget(region="us-east-1", endpoint_url="http://127.0.0.1:9"))


def main_hook() -> None:
    count_call(f"{MODEL.service_model.endpoint_prefix}.{MODEL.name}")


def all_hooks() -> None:
    ctx: dict[str, object] = {}
    CLIENTS._count_call(model=MODEL, context=ctx)
    session._note_attempt(response=(HTTP, {}), caught_exception=None, request_dict={"context": ctx})
    CLIENTS._call_done(http_response=HTTP, parsed={}, context=ctx)


def per_call(fn: object, n: int) -> float:
    return min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e6  # type: ignore[arg-type]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200_000)
    n = ap.parse_args().calls
    print(f"main's before-call hook: {per_call(main_hook, n):.2f} us/call")
    print(f"all hooks, tracing off:  {per_call(all_hooks, n):.2f} us/call")
    tracing.install(TracerProvider())
    print(f"all hooks, tracing on:   {per_call(all_hooks, max(1, n // 10)):.2f} us/call")


if __name__ == "__main__":
    main()
