"""The sandbox process: moto's server behind a strict layer (an emulated AWS account, vmplane.sandbox.aws)
and the embedded Google Cloud sandbox (an emulated project, vmplane.sandbox.gcp), both on 127.0.0.1 in one
process, on two ports.

Run by `vmplane sandbox start` (or `--sandbox`) as a detached child; it stays up for later commands
until `vmplane sandbox stop`.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
import time


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m vmplane.sandbox.serve")
    parser.add_argument("--port", type=int, required=True, help="moto's port (AWS)")
    parser.add_argument("--gcp-port", type=int, default=None, help="the Google Cloud sandbox's port")
    parser.add_argument("--faults", default=None, help="a fault profile (sandbox/faults.py) for both sandboxes")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's per-request lines, as before
    # Lets the sandbox attach AWS managed policies such as AmazonSSMManagedInstanceCore.
    os.environ["MOTO_IAM_LOAD_MANAGED_POLICIES"] = "true"
    injector = None
    if args.faults:
        from pathlib import Path

        from vmplane.sandbox.faults import Injector, load

        injector = Injector(load(Path(args.faults)))
        logging.getLogger("vmplane.sandbox").info("fault profile %s", injector.profile.summary())
    gcp = None
    if args.gcp_port:
        from vmplane.sandbox.gcp.server import GcpSandbox

        started = time.perf_counter()
        gcp = GcpSandbox(args.gcp_port)
        if injector is not None:
            from vmplane.sandbox.faults_gcp import GcpFaults

            gcp.faults = GcpFaults(injector)
        gcp.start()
        logging.getLogger("vmplane.sandbox").info(
            "Google Cloud sandbox on 127.0.0.1:%d in %.3fs (discovery %s)",
            gcp.port,
            time.perf_counter() - started,
            gcp.discovery.revisions,
        )
    from vmplane.sandbox.aws import extras, moto_speed
    from vmplane.sandbox.aws.app import Wrapper, build_app, serve

    moto_speed.install()  # same answers; a describe no longer scans every tag of the region per resource
    # What AWS does after accepting a request (ACM issues once its record exists, NAT fails without a
    # gateway, ...): see extras.py.
    extras.install()
    # More middlewares (a fault profile) wrap the strict layer from outside: see build_app.
    wrappers: list[Wrapper] = []
    if injector is not None:
        from vmplane.sandbox.faults_aws import AwsFaults

        wrappers.append(lambda inner: AwsFaults(inner, injector))
    server = serve(build_app(wrappers), args.port)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    # Wait with a timeout: Python runs signal handlers in the main thread only between bytecodes, and an
    # untimed wait can miss a SIGTERM that arrived while a server thread was busy.
    while not stop.wait(0.2):
        pass
    server.shutdown()
    if gcp is not None:
        gcp.stop()


if __name__ == "__main__":
    main()
