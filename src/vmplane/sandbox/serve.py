"""The sandbox process: moto's server on 127.0.0.1, an emulated AWS account that lives in memory.

Run by `vmplane sandbox start` (or `--sandbox`) as a detached child; it stays up for later commands
until `vmplane sandbox stop`.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m vmplane.sandbox.serve")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    # Lets the sandbox attach AWS managed policies such as AmazonSSMManagedInstanceCore.
    os.environ["MOTO_IAM_LOAD_MANAGED_POLICIES"] = "true"
    # moto marks a DNS-validated certificate ISSUED once this many seconds have passed (it never looks
    # at the validation record). AWS takes minutes after the record exists; the sandbox does not wait.
    os.environ["MOTO_ACM_VALIDATION_WAIT"] = "0"
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=args.port, verbose=False)
    server.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    # Wait with a timeout: Python runs signal handlers in the main thread only between bytecodes, and an
    # untimed wait can miss a SIGTERM that arrived while a server thread was busy.
    while not stop.wait(0.2):
        pass
    server.stop()


if __name__ == "__main__":
    main()
