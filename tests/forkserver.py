"""A fork server for the tests' `vmplane` processes: the same `python -m vmplane ARGS`, minus its imports.

A `vmplane apply` on the sandbox spends ~2 s of CPU importing its libraries (compute_v1's message types,
DBOS, SQLAlchemy, pydantic, boto3, typer, rich) before it does anything, and the crash sweeps start four
such processes per case. This server imports those libraries once, and vmplane's own modules (~0.6 s
more per command; none reads the environment or the working directory when imported, which
tests/unit/test_forkserver.py checks), then for each request forks a process that takes the
request's argv, environment, working directory and stdin/stdout/stderr, and runs `vmplane` exactly as
`python -m vmplane` does (runpy, `__main__`, a normal interpreter exit). It is a real process of its own:
the tests kill -9 it by its pid and read its exit status, as with `subprocess`.

Per request, the server forks a waiter, which forks the command and reports `{"pid"}` and then
`{"returncode"}` (negative: the signal that ended it) on the request's connection; the server itself stays
single-threaded (forking a threaded process is unsafe). `VMPLANE_TEST_FORK=0` turns it off: every
command then starts with `subprocess` (tests/helpers.py).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import io
import json
import os
import runpy
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any, NoReturn

# Third-party modules a `vmplane` command imports before it does any work (measured with -X importtime).
PRELOAD = [
    "typer",
    "rich.console",
    "rich.table",
    "pydantic",
    "pydantic_settings",
    "yaml",
    "jinja2",
    "sqlalchemy",
    "sqlalchemy.orm",
    "sqlalchemy.dialects.sqlite",
    "alembic.command",
    "alembic.config",
    "dbos",
    "prometheus_client",
    "boto3",
    "proxmoxer",
    "requests",
    "pycdlib",
    "botocore.session",
    "googleapiclient.discovery",
    "google_auth_httplib2",
    "google.auth",
    "google.api_core.client_options",
    "google.cloud.compute_v1.types",
    # the compute clients vmplane's GCP driver uses
    "google.cloud.compute_v1.services.backend_services",
    "google.cloud.compute_v1.services.firewalls",
    "google.cloud.compute_v1.services.global_addresses",
    "google.cloud.compute_v1.services.global_forwarding_rules",
    "google.cloud.compute_v1.services.global_operations",
    "google.cloud.compute_v1.services.health_checks",
    "google.cloud.compute_v1.services.images",
    "google.cloud.compute_v1.services.instance_groups",
    "google.cloud.compute_v1.services.instances",
    "google.cloud.compute_v1.services.machine_types",
    "google.cloud.compute_v1.services.networks",
    "google.cloud.compute_v1.services.region_autoscalers",
    "google.cloud.compute_v1.services.region_instance_group_managers",
    "google.cloud.compute_v1.services.region_instance_groups",
    "google.cloud.compute_v1.services.region_instance_templates",
    "google.cloud.compute_v1.services.region_operations",
    "google.cloud.compute_v1.services.regions",
    "google.cloud.compute_v1.services.resource_policies",
    "google.cloud.compute_v1.services.routers",
    "google.cloud.compute_v1.services.ssl_certificates",
    "google.cloud.compute_v1.services.subnetworks",
    "google.cloud.compute_v1.services.target_http_proxies",
    "google.cloud.compute_v1.services.target_https_proxies",
    "google.cloud.compute_v1.services.url_maps",
    "google.cloud.compute_v1.services.zone_operations",
    "google.cloud.compute_v1.services.zones",
]
MAX_MESSAGE = 1 << 20
# A directory: each forked command writes there, at exit, its wall and CPU seconds and every time.sleep
# it made by caller (bench/suite_time.py sums them): where a command waits rather than works.
TIMING_ENV = "SUITE_TIMING_DIR"  # not VMPLANE_*: tests/helpers.py keeps those from the commands


def _record_timing(out: Path, args: list[str]) -> None:
    start, lock = time.monotonic(), threading.Lock()
    sleeps: dict[str, tuple[int, float]] = {}
    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        f = sys._getframe(1)
        where = f"{f.f_code.co_filename.rsplit('site-packages/', 1)[-1]}:{f.f_lineno} {f.f_code.co_name}"
        begin = time.monotonic()
        try:
            real_sleep(seconds)
        finally:
            with lock:
                n, total = sleeps.get(where, (0, 0.0))
                sleeps[where] = (n + 1, total + time.monotonic() - begin)

    def write() -> None:
        cpu = os.times()
        record = {"args": args[:1], "wall": time.monotonic() - start, "cpu": cpu.user + cpu.system, "sleeps": sleeps}
        (out / f"{os.getpid()}.json").write_text(json.dumps(record))

    real_exit = os._exit

    def exit_now(code: int) -> NoReturn:  # vmplane ends a command that ran a workflow with os._exit
        write()
        real_exit(code)

    time.sleep, os._exit = sleep, exit_now  # type: ignore[assignment]
    atexit.register(write)  # a command killed by SIGKILL writes nothing: its wait is in the test's wall


# vmplane's modules a cloud command imports (its CLI, the jobs layer, the workflows, the three drivers).
VMPLANE_PRELOAD = [
    "vmplane.cli.main",
    "vmplane.jobs.operations",
    "vmplane.pipeline.workflows",
    "vmplane.clouds.aws.driver",
    "vmplane.clouds.gcp.driver",
    "vmplane.clouds.proxmox.driver",
]
# The AWS services vmplane's driver makes clients for (clouds/aws), whose botocore data files are read here.
AWS_SERVICES = ["acm", "autoscaling", "ec2", "elbv2", "iam", "route53", "s3", "scheduler", "ssm", "sts"]


def _preload() -> None:
    import importlib

    import vmplane.clouds.gcp  # noqa: F401 - only installs the lazy compute_v1 package, as a command would

    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    _share_botocore_data()
    for name in VMPLANE_PRELOAD:
        importlib.import_module(name)


def _share_botocore_data() -> None:
    """Each boto3 session has a botocore loader that parses its JSON data files (ec2's model is 2.5 MB)
    and caches them on itself, and each `vmplane` command makes a session: its 8 clients cost ~0.6 s of
    CPU, ~0.08 s once the files are parsed. So every loader of a forked command shares one cache, filled
    here from the same files. botocore already shares a loaded model among all clients of a session, so
    nothing in it is written after loading; a command that changes botocore's search path (AWS_DATA_PATH)
    would get the cached files, and none of vmplane's does."""
    import boto3
    import botocore.loaders

    shared: dict[Any, Any] = {}
    init = botocore.loaders.Loader.__init__

    def share(self: botocore.loaders.Loader, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self._cache = shared  # the instance_cache decorator's per-loader dict

    botocore.loaders.Loader.__init__ = share  # type: ignore[method-assign]
    session = boto3.session.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-1")
    for service in AWS_SERVICES:
        session.client(service, endpoint_url="http://127.0.0.1:9")  # no request is made


def serve(path: str) -> tuple[dict[str, Any], list[int]] | None:
    """Answer requests until stdin closes (the test process ended). Returns in a forked command process
    only: its request and its three fds, for `main` to run with nothing of the server's loop on the stack."""
    _preload()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the waiters are reaped by the kernel
    gc.freeze()  # the preloaded objects stay out of the commands' collections (and their pages shared)
    print("ready", flush=True)
    while True:
        readable, _, _ = select.select([listener, sys.stdin], [], [])
        if sys.stdin in readable and not sys.stdin.buffer.read1(1):
            return None
        if listener not in readable:
            continue
        conn, _ = listener.accept()
        raw, fds, _, _ = socket.recv_fds(conn, MAX_MESSAGE, 3)
        size, _, raw = raw.partition(b"\n")  # a stream socket may deliver a long request in parts
        while len(raw) < int(size):
            raw += conn.recv(int(size) - len(raw))
        sys.stdout.flush()
        sys.stderr.flush()
        if os.fork() != 0:  # the server: on to the next request
            conn.close()
            for fd in fds:
                os.close(fd)
            continue
        # The waiter.
        listener.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # so that it can wait for its child
        pid = os.fork()
        if pid == 0:
            conn.close()
            return json.loads(raw), fds
        for fd in fds:
            os.close(fd)
        try:
            conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
            _, status = os.waitpid(pid, 0)
            conn.sendall(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
        finally:
            os._exit(0)


def run_command(request: dict[str, Any], fds: list[int]) -> None:
    """In the forked process: become `python -m vmplane ARGS` with the request's environment and stdio."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace", line_buffering=True
    )
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    sys.path[0] = str(Path.cwd())  # what `python -m` puts first
    sys.argv = ["-m", *request["args"]]
    if os.environ.get(TIMING_ENV):
        _record_timing(Path(os.environ[TIMING_ENV]), request["args"])
    runpy.run_module("vmplane", run_name="__main__", alter_sys=True)


class Server:
    """The client: one server per test process, started on first use."""

    _lock = threading.Lock()
    _instance: Server | None = None

    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="vmplane-fork-")
        atexit.register(shutil.rmtree, self._dir, ignore_errors=True)
        self.path = str(Path(self._dir) / "sock")
        root = Path(__file__).resolve().parents[1]
        self.proc = subprocess.Popen(
            [sys.executable, "-c", f"import sys; from tests.forkserver import main; main({self.path!r})"],
            cwd=root,
            env={k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "VMPLANE_"))},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"the fork server did not start: {line!r}")

    @classmethod
    def get(cls) -> Server:
        with cls._lock:
            if cls._instance is None or cls._instance.proc.poll() is not None:
                cls._instance = cls()
            return cls._instance

    def spawn(self, args: list[str], env: dict[str, str], stdout: IO[Any], stderr: IO[Any]) -> Forked:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(self.path)
        body = json.dumps({"args": args, "env": env, "cwd": str(Path.cwd())}).encode()
        request = str(len(body)).encode() + b"\n" + body
        with Path(os.devnull).open("rb") as devnull:
            sent = socket.send_fds(conn, [request], [devnull.fileno(), stdout.fileno(), stderr.fileno()])
        conn.sendall(request[sent:])
        return Forked(args, conn, stdout, stderr)


class Forked:
    """What the tests use of a `subprocess.Popen`: pid, poll, wait, communicate, kill, returncode."""

    def __init__(self, args: list[str], conn: socket.socket, stdout: IO[Any], stderr: IO[Any]) -> None:
        self.args, self._conn, self._out, self._err = args, conn, stdout, stderr
        self._reader = conn.makefile("r")
        self.pid: int = json.loads(self._reader.readline())["pid"]
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._conn], [], [], 0)[0]:
            self._read_status()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._conn], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self._read_status()
        assert self.returncode is not None
        return self.returncode

    def _read_status(self) -> None:
        line = self._reader.readline()
        if not line:
            raise RuntimeError(f"the fork server's waiter for {self.pid} ended without a status")
        self.returncode = int(json.loads(line)["returncode"])
        self._reader.close()
        self._conn.close()

    def kill(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        self.wait(timeout)
        out: list[str] = []
        for f in (self._out, self._err):
            f.seek(0)
            out.append(f.read())
            f.close()
        return out[0], out[1]


def run(args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """`subprocess.run(..., capture_output=True, text=True, check=False)` through the fork server."""
    proc = popen(args, env)
    deadline = time.monotonic() + timeout
    try:
        proc.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    out, err = proc.communicate()
    return subprocess.CompletedProcess(args, proc.wait(), out, err)


def popen(args: list[str], env: dict[str, str]) -> Forked:
    # Files, not pipes: the command may print more than a pipe holds before anyone reads it.
    stdout = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115 - Forked.communicate closes them
    stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="backslashreplace")  # noqa: SIM115
    return Server.get().spawn(args, env, stdout, stderr)


def enabled() -> bool:
    return os.environ.get("VMPLANE_TEST_FORK", "1") != "0" and hasattr(os, "fork") and hasattr(socket, "send_fds")


def main(path: str) -> None:
    got = serve(path)
    if got is None:
        return
    # The forked command process. It ends as an interpreter does (its threads joined, atexit handlers run,
    # stdio flushed) but without tearing down the preloaded modules, which costs more than the command.
    code: int = 0
    try:
        run_command(*got)
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        if not isinstance(done.code, int | None):
            print(done.code, file=sys.stderr)
    except BaseException:  # what an uncaught exception does to `python -m vmplane`
        sys.excepthook(*sys.exc_info())
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
