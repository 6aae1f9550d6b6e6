"""A proxy in front of the moto sandbox that behaves like a slow cloud: per-call latency, and slow
resources kept in their pending states for their real durations x a factor (bench/README.md lists them).

    python bench/cloud_sim.py --upstream http://127.0.0.1:4566 [--port 4600] [--latency-ms 50]
                              [--factor 0.1] [--log calls.jsonl]

Point vmplane (`VMPLANE_SANDBOX_PORT`) or Terraform's provider endpoints at it. It never fakes success:
every call goes to moto, and only *describe* answers of resources younger than their duration are
rewritten back to the pending state (NAT gateway, ALB, ACM certificate, instance, ASG instance, Route53
change, the bootstrap sentinel's SSM result). A resource's clock starts when the proxy sees the call
that created (or deleted) it, or, for ids it never saw created (an ASG's instances), when it first
sees the id. `--factor 0` turns the pending states off (latency only). Every call is logged as one
JSON line: service, operation, client, start, end (epoch seconds), HTTP status, rewritten or not.
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import threading
import time
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any

from sim_xml import XmlEdit

# Real durations in seconds (sources in bench/README.md), scaled by --factor.
REAL_S: dict[str, float] = {
    "nat": 120.0,  # NAT gateway pending -> available
    "nat_delete": 60.0,  # NAT gateway deleting -> deleted
    "alb": 180.0,  # ALB provisioning -> active
    "cert": 120.0,  # ACM PENDING_VALIDATION -> ISSUED, counted from the validation CNAME's creation
    "instance": 45.0,  # EC2 instance pending -> running (ASG lifecycle Pending -> InService)
    "bootstrap": 90.0,  # running -> the bootstrap sentinel exists (cloud-init: Docker, NGINX)
    "terminate": 45.0,  # EC2 instance shutting-down -> terminated
    "dns": 60.0,  # Route53 change PENDING -> INSYNC
}
SENTINEL = "bootstrap-complete"  # part of the sentinel path vmplane's check command tests


# ---- the simulation's clocks ----


class Clocks:
    """When each resource's pending period started; `pending(kind, id)` says whether it still runs."""

    def __init__(self, factor: float) -> None:
        self.factor = factor
        self._t: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def start(self, kind: str, rid: str, at: float | None = None) -> float:
        with self._lock:
            return self._t.setdefault((kind, rid), time.time() if at is None else at)

    def started(self, kind: str, rid: str) -> float | None:
        with self._lock:
            return self._t.get((kind, rid))

    def pending(self, kind: str, rid: str, *, duration: float | None = None) -> bool:
        """Starts the clock at first sight; true while it has run less than the scaled duration."""
        if self.factor <= 0:
            return False
        t0 = self.start(kind, rid)
        return time.time() < t0 + self.factor * (REAL_S[kind] if duration is None else duration)


def _dns_name(name: str) -> str:
    return name.strip().rstrip(".").lower()


# ---- rewrites per (service, operation); each returns the new body (or the same) ----


def _ec2(op: str, body: str, req: bytes, c: Clocks) -> str:
    x = XmlEdit(body)
    if op == "CreateNatGateway":
        for rid, _ in x.items("natGatewayId"):
            c.start("nat", rid)
    elif op == "DeleteNatGateway":
        for rid in urllib.parse.parse_qs(req.decode("utf-8", "replace")).get("NatGatewayId", []):
            c.start("nat_delete", rid)
    elif op == "DescribeNatGateways":
        for rid, b in x.items("natGatewayId"):
            state = x.text(b.child("state"))
            if state == "available" and c.pending("nat", rid):
                x.set(b.child("state"), "pending")
            elif state == "deleted" and c.pending("nat_delete", rid):
                x.set(b.child("state"), "deleting")
    elif op in ("RunInstances", "TerminateInstances"):
        for rid, _ in x.items("instanceId"):
            c.start("instance" if op == "RunInstances" else "terminate", rid)
    elif op == "DescribeInstances":
        for rid, b in x.items("instanceId"):
            name = x.text(b.child("instanceState", "name"))
            if name == "running" and c.pending("instance", rid):
                x.set(b.child("instanceState", "name"), "pending")
                x.set(b.child("instanceState", "code"), "0")
            elif name == "terminated" and c.pending("terminate", rid):
                x.set(b.child("instanceState", "name"), "shutting-down")
                x.set(b.child("instanceState", "code"), "32")
    return x.result()


def _autoscaling(op: str, body: str, req: bytes, c: Clocks) -> str:
    if op != "DescribeAutoScalingGroups":
        return body
    x = XmlEdit(body)
    for rid, b in x.items("InstanceId"):
        if x.text(b.child("LifecycleState")) == "InService" and c.pending("instance", rid):
            x.set(b.child("LifecycleState"), "Pending")
    return x.result()


def _elb(op: str, body: str, req: bytes, c: Clocks) -> str:
    x = XmlEdit(body)
    if op == "CreateLoadBalancer":
        for rid, _ in x.items("LoadBalancerArn"):
            c.start("alb", rid)
    elif op == "DescribeLoadBalancers":
        for rid, b in x.items("LoadBalancerArn"):
            if x.text(b.child("State", "Code")) == "active" and c.pending("alb", rid):
                x.set(b.child("State", "Code"), "provisioning")
    return x.result()


def _route53(op: str, body: str, req: bytes, c: Clocks) -> str:
    x = XmlEdit(body)
    if op == "ChangeResourceRecordSets":
        rx = XmlEdit(req.decode("utf-8", "replace"))
        for _, change in rx.items("Action"):
            rrs = change.child("ResourceRecordSet")
            if rx.text(change.child("Action")) in ("CREATE", "UPSERT") and rrs is not None:
                c.start("record", _dns_name(rx.text(rrs.child("Name"))))
        for rid, _ in x.items("Id"):
            c.start("dns", rid)
    elif op == "GetChange":
        for rid, b in x.items("Id"):
            if x.text(b.child("Status")) == "INSYNC" and c.pending("dns", rid):
                x.set(b.child("Status"), "PENDING")
    return x.result()


def _cert_pending(cert: dict[str, Any], c: Clocks) -> bool:
    """ISSUED only `cert` after every validation CNAME exists in Route53 (never, if none was written)."""
    if c.factor <= 0:
        return False
    names = [
        _dns_name(o["ResourceRecord"]["Name"]) for o in cert.get("DomainValidationOptions", []) if "ResourceRecord" in o
    ]
    written = [c.started("record", n) for n in names]
    if not names or any(t is None for t in written):
        return True
    return time.time() < max(t for t in written if t is not None) + c.factor * REAL_S["cert"]


def _acm(op: str, body: str, req: bytes, c: Clocks) -> str:
    if op != "DescribeCertificate":
        return body
    doc = json.loads(body)
    cert = doc.get("Certificate", {})
    if cert.get("Status") == "ISSUED" and cert.get("Type") == "AMAZON_ISSUED" and _cert_pending(cert, c):
        cert["Status"] = "PENDING_VALIDATION"
        for o in cert.get("DomainValidationOptions", []):
            o["ValidationStatus"] = "PENDING_VALIDATION"
        return json.dumps(doc)
    return body


def _ssm(op: str, body: str, req: bytes, c: Clocks) -> str:
    doc = json.loads(body)
    if op == "SendCommand":
        params = json.loads(req or b"{}").get("Parameters", {})
        if any(SENTINEL in cmd for cmd in params.get("commands", [])):
            c.start("sentinel_cmd", doc["Command"]["CommandId"])
        return body
    if op != "GetCommandInvocation" or c.started("sentinel_cmd", doc.get("CommandId", "")) is None:
        return body
    # The sentinel exists once the instance has booted and cloud-init has run; until then the check
    # command runs and fails, as `test -f` would on the real VM.
    boot = REAL_S["instance"] + REAL_S["bootstrap"]
    if doc.get("Status") == "Success" and c.pending("instance", doc.get("InstanceId", ""), duration=boot):
        doc |= {"Status": "Failed", "StatusDetails": "Failed", "ResponseCode": 1, "StandardOutputContent": ""}
        return json.dumps(doc)
    return body


def detail(service: str, op: str, req: bytes, status: int, data: bytes) -> str:
    """What the log keeps beyond the operation: DNS changes (ACTION name type) and refusals' error codes."""
    if status >= 400:
        m = re.search(rb"<Code>([^<]+)</Code>|\"__type\":\s*\"([^\"]+)\"", data)
        return (m.group(1) or m.group(2) or b"").decode("utf-8", "replace") if m else ""
    if service == "route53" and op == "ChangeResourceRecordSets":
        rx = XmlEdit(req.decode("utf-8", "replace"))
        parts = []
        for _, change in rx.items("Action"):
            rrs = change.child("ResourceRecordSet")
            if rrs is not None:
                parts.append(
                    f"{rx.text(change.child('Action'))} {rx.text(rrs.child('Name'))} {rx.text(rrs.child('Type'))}"
                )
        return "; ".join(parts)
    return ""


REWRITES: dict[str, Callable[[str, str, bytes, Clocks], str]] = {
    "ec2": _ec2,
    "autoscaling": _autoscaling,
    "elasticloadbalancing": _elb,
    "route53": _route53,
    "acm": _acm,
    "ssm": _ssm,
}


# ---- the HTTP side ----

_SIGNING = re.compile(r"Credential=[^/]+/[^/]+/[^/]+/([^/]+)/")
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "accept-encoding", "te", "upgrade"}


def operation(service: str, method: str, path: str, headers: Any, body: bytes) -> str:
    """The API operation: X-Amz-Target (JSON), Action= (Query), or the REST route (Route53)."""
    if target := headers.get("X-Amz-Target"):
        return str(target).rsplit(".", 1)[-1]
    url = urllib.parse.urlsplit(path)
    query = urllib.parse.parse_qs(url.query)
    if "Action" not in query and body and b"Action=" in body[:4096]:
        query = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
    if "Action" in query:
        return query["Action"][0]
    if service == "route53":
        if url.path.endswith("/rrset") or url.path.endswith("/rrset/"):
            return "ChangeResourceRecordSets" if method == "POST" else "ListResourceRecordSets"
        if "/change/" in url.path:
            return "GetChange"
    return f"{method} {re.sub(r'/[A-Za-z0-9_-]{10,}', '/{id}', url.path)}"


class Proxy(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, upstream: str, latency_s: float, clocks: Clocks, log: IO[str] | None) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        up = urllib.parse.urlsplit(upstream)
        self.up_host, self.up_port = up.hostname or "127.0.0.1", up.port or 80
        self.latency_s, self.clocks, self.log = latency_s, clocks, log
        self.log_lock = threading.Lock()
        self.local = threading.local()

    def upstream(self) -> http.client.HTTPConnection:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = http.client.HTTPConnection(self.up_host, self.up_port, timeout=120)
        return conn

    def record(self, entry: dict[str, Any]) -> None:
        if self.log is not None:
            with self.log_lock:
                self.log.write(json.dumps(entry) + "\n")
                self.log.flush()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as boto3 and the Go SDK expect
    server: Proxy

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass
            return b"".join(parts)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _forward(self) -> None:
        start = time.time()
        body = self._body()
        m = _SIGNING.search(self.headers.get("Authorization", ""))
        service = m.group(1) if m else ""
        aws_call = bool(service) and not self.path.startswith("/moto-api")
        if aws_call and self.server.latency_s > 0:
            time.sleep(self.server.latency_s)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
        headers["Content-Length"] = str(len(body))
        conn = self.server.upstream()
        try:
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        except (OSError, http.client.HTTPException):
            conn.close()  # a stale keep-alive connection: once more on a new one
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        op = operation(service, self.command, self.path, self.headers, body) if aws_call else ""
        rewritten = False
        rewrite = REWRITES.get(service)
        if aws_call and rewrite is not None and resp.status < 300 and data:
            new = rewrite(op, data.decode("utf-8"), body, self.server.clocks).encode("utf-8")
            rewritten, data = new != data, new
        self.send_response(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in _HOP:
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        if aws_call:
            ua = self.headers.get("User-Agent", "")
            client = "terraform" if "Terraform" in ua or "terraform" in ua else "vmplane" if "Boto" in ua else "other"
            self.server.record(
                {
                    "service": service,
                    "op": op,
                    "client": client,
                    "start": start,
                    "end": time.time(),
                    "status": resp.status,
                    "rewritten": rewritten,
                    "detail": detail(service, op, body, resp.status, data),
                }
            )

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = _forward


def serve(upstream: str, port: int, latency_ms: float, factor: float, log: Path | None) -> Proxy:
    """A running proxy (its own daemon thread); `shutdown()` stops it."""
    out = log.open("a", encoding="utf-8") if log else None
    proxy = Proxy(port, upstream, latency_ms / 1000.0, Clocks(factor), out)
    threading.Thread(target=proxy.serve_forever, name="cloud-sim", daemon=True).start()
    return proxy


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--upstream", required=True, help="the moto sandbox, e.g. http://127.0.0.1:4566")
    ap.add_argument("--port", type=int, default=4600)
    ap.add_argument("--latency-ms", type=float, default=50.0)
    ap.add_argument("--factor", type=float, default=0.1, help="scale of the real durations; 0: no pending states")
    ap.add_argument("--log", type=Path, help="JSONL file: one line per call")
    args = ap.parse_args(argv)
    proxy = serve(args.upstream, args.port, args.latency_ms, args.factor, args.log)
    print(f"cloud-sim on http://127.0.0.1:{proxy.server_address[1]} -> {args.upstream}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        proxy.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
