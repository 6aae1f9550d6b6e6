"""Issue 26's proof that a secret is never stored in clear: values with unique markers are planted in the
sandbox's stores (moto's Secrets Manager and SSM SecureString; the GCP sandbox's Secret Manager, skipped
while a sandbox does not serve it), a copy of the fixed example referencing them goes through every path
(validate, plan, apply, status, jobs, `tf generate`, the API's GETs, the dashboard's job page and its live
events, destroy), with JSON debug logs on and traces sent to an OTLP collector of the test's own, and
every byte those left is searched for each marker (plain, and base64 at each alignment): the database
files, every file under VMPLANE_HOME, every command's stdout and stderr, the API answers, the dashboard's
HTML, the generated .tf files, the trace exports, the launch template's user data and the scripts the exec
channel was sent.

What an emulator cannot show: moto records SSM SendCommand and runs nothing, so no VM here fetches its
secrets; what is searched is what the control plane sent and kept (GCP's exec mailbox is cleared once
the guest answers, so there the scripts are not searched after the fact; the GCP sandbox's access record
shows no payload read but the test's own). The generated stack also goes through `terraform plan -out`,
`show -json`, `apply` and its `terraform.tfstate` (test_secrets_never_stored_tf.py). A Proxmox `env:`
value is never in a store to plant: its redaction is tested below."""

from __future__ import annotations

import base64
import gzip
import io
import json
import re
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.helpers import Cli, Sandbox, vmplane_serve, write_env

pytestmark = pytest.mark.slow  # a whole apply/destroy through the CLI, a server and its dashboard


# -- what is searched, and how ---------------------------------------------------------------------


def forms(marker: str) -> list[bytes]:
    """The marker as bytes, and base64 of it at each of the three alignments (standard and URL-safe):
    user data, metadata and payloads carry base64, where the plain bytes would not show."""
    raw = marker.encode()
    out = [raw]
    for skip in range(3):
        chunk = raw[skip:]
        chunk = chunk[: len(chunk) // 3 * 3]
        out += [base64.b64encode(chunk), base64.urlsafe_b64encode(chunk)]
    return out


@dataclass
class Evidence:
    """Every byte the paths left, by where it came from."""

    items: list[tuple[str, bytes]] = field(default_factory=list)

    def add(self, where: str, data: str | bytes) -> None:
        self.items.append((where, data.encode() if isinstance(data, str) else data))

    def proc(self, name: str, proc: Any) -> None:
        self.add(f"{name}: stdout", proc.stdout)
        self.add(f"{name}: stderr", proc.stderr)

    def tree(self, label: str, root: Path) -> int:
        files = [p for p in sorted(root.rglob("*")) if p.is_file()]
        for p in files:
            self.add(f"{label}/{p.relative_to(root)}", p.read_bytes())
        return len(files)

    def found(self, markers: dict[str, str]) -> list[str]:
        return [
            f"{label} ({value}) in {where}"
            for label, value in markers.items()
            for where, data in self.items
            if any(f in data for f in forms(value))
        ]


def test_the_search_finds_a_marker_plain_and_in_base64() -> None:
    """The net catches what it must: a test that can never fail proves nothing."""
    marker = f"leak-marker-{uuid.uuid4().hex}"
    for prefix in (b"", b"a", b"ab"):
        ev = Evidence()
        ev.add("user-data", base64.b64encode(prefix + b"DB_PASSWORD=" + marker.encode() + b"\n"))
        assert ev.found({"db": marker}) == [f"db ({marker}) in user-data"], prefix
    ev = Evidence()
    ev.add("log", f'{{"msg": "pushed {marker}"}}')
    ev.add("clean", "DB_PASSWORD=[redacted]")
    assert [f.rsplit(" in ", 1)[1] for f in ev.found({"db": marker})] == ["log"]


class Collector(ThreadingHTTPServer):
    """An OTLP/HTTP endpoint that keeps every export's body: protobuf holds strings as their bytes."""

    bodies: list[bytes]


class _Handler(BaseHTTPRequestHandler):
    server: Collector

    def do_POST(self) -> None:
        self.server.bodies.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_args: Any) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[Collector]:
    server = Collector(("127.0.0.1", 0), _Handler)
    server.bodies = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@dataclass
class Observed(Cli):
    """The CLI with debug JSON logs and traces to the collector, for every command and `vmplane serve`."""

    otlp: str = ""

    @property
    def env(self) -> dict[str, str]:
        return {
            **super().env,
            "VMPLANE_LOG_FORMAT": "json",
            "VMPLANE_LOG_LEVEL": "debug",
            "OTEL_EXPORTER_OTLP_ENDPOINT": self.otlp,
            "OTEL_SERVICE_NAME": "vmplane-leak-test",
        }


# -- the planted secrets ---------------------------------------------------------------------------


@dataclass
class Planted:
    markers: dict[str, str]  # what each planted value is -> the value
    runtime: dict[str, Any]  # the env file's runtime block: references only
    example: str


def plant_aws(sb: Sandbox, uid: str) -> Planted:
    db, api, tls = (f"leak-{what}-{uuid.uuid4().hex}" for what in ("aws-sm-json", "aws-ssm", "aws-sm-file"))
    sm, ssm = sb.client("secretsmanager"), sb.client("ssm")
    sm.create_secret(Name=f"itest-leak/{uid}/db", SecretString=json.dumps({"user": "app", "password": db}))
    sm.create_secret(Name=f"itest-leak/{uid}/tls", SecretString=tls)
    ssm.put_parameter(Name=f"/itest-leak/{uid}/api-key", Value=api, Type="SecureString")
    # The stores hold them (a search that finds nothing because nothing was planted proves nothing).
    assert json.loads(sm.get_secret_value(SecretId=f"itest-leak/{uid}/db")["SecretString"])["password"] == db
    assert ssm.get_parameter(Name=f"/itest-leak/{uid}/api-key", WithDecryption=True)["Parameter"]["Value"] == api
    runtime = {
        "env": {
            "LOG_LEVEL": "info",
            "DB_PASSWORD": {"secret": f"aws-sm:itest-leak/{uid}/db#password"},
            "API_KEY": {"secret": f"aws-ssm:/itest-leak/{uid}/api-key"},
        },
        "files": {"/etc/app/tls.pem": {"secret": f"aws-sm:itest-leak/{uid}/tls"}},
    }
    return Planted({"aws-sm json key": db, "aws-ssm SecureString": api, "aws-sm file": tls}, runtime, "fixed.jsonc")


def plant_gcp(sb: Sandbox, uid: str) -> Planted:
    project = "vmplane-sandbox"  # examples/gcp-fixed.jsonc's
    base = f"{sb.gcp_endpoint}/v1/projects/{project}/secrets"
    db, tls = (f"leak-{what}-{uuid.uuid4().hex}" for what in ("gcp-sm", "gcp-sm-file"))
    with httpx.Client(headers={"Authorization": "Bearer sandbox"}, timeout=30) as c:
        for sid, value in ((f"leak-{uid}-db", db), (f"leak-{uid}-tls", tls)):
            r = c.post(base, params={"secretId": sid}, json={"replication": {"automatic": {}}})
            if r.status_code == 404:
                pytest.skip("the GCP sandbox does not serve Secret Manager v1 yet (the gsm helper's part)")
            assert r.status_code == 200, r.text
            payload = {"payload": {"data": base64.b64encode(value.encode()).decode()}}
            assert c.post(f"{base}/{sid}:addVersion", json=payload).status_code == 200
            got = c.get(f"{base}/{sid}/versions/latest:access").json()
            assert base64.b64decode(got["payload"]["data"]).decode() == value
    runtime = {
        "env": {"LOG_LEVEL": "info", "DB_PASSWORD": {"secret": f"gcp-sm:leak-{uid}-db"}},
        "files": {"/etc/app/tls.pem": {"secret": f"gcp-sm:leak-{uid}-tls/versions/1"}},
    }
    return Planted({"gcp-sm": db, "gcp-sm file": tls}, runtime, "gcp-fixed.jsonc")


def secret_names(runtime: dict[str, Any]) -> list[str]:
    """The secrets' names in a runtime block (a reference without its store, key or version)."""
    refs = [v["secret"] for kind in ("env", "files") for v in runtime[kind].values() if isinstance(v, dict)]
    return sorted({re.split(r"[#]|/versions/", r.partition(":")[2])[0] for r in refs})


def gcp_payload_reads(sb: Sandbox, runtime: dict[str, Any]) -> dict[str, int]:
    """How many times each planted secret's payload was read (the GCP sandbox records every access): only
    the test's own check in plant_gcp, so vmplane's control plane read none of them."""
    accesses = httpx.get(f"{sb.gcp_endpoint}/_sandbox/secret-accesses", params={"project": "vmplane-sandbox"}).json()
    names = secret_names(runtime)
    counts = dict.fromkeys(names, 0)
    for a in accesses["accesses"]:
        short = a["secret"].rsplit("/", 1)[-1]
        if short in counts:
            counts[short] += 1
    return counts


# -- the paths -------------------------------------------------------------------------------------


def through_the_server(cli: Observed, job_id: str, ev: Evidence) -> None:
    """The API's GETs and the dashboard's job page and events, from a real `vmplane serve`."""
    token = cli.json("tokens", "create", "--org", "acme", "--role", "admin")["token"]
    log = cli.home / "serve.log"  # under VMPLANE_HOME: searched with every other file there
    with vmplane_serve(cli, log) as url, httpx.Client(base_url=url, timeout=60) as c:
        api = {"Authorization": f"Bearer {token}"}
        job = c.get(f"/provisioning-jobs/{job_id}", headers=api)
        assert job.status_code == 200, job.text
        ev.add("GET /provisioning-jobs/{id}", job.content)
        ev.add("GET /provisioning-jobs", c.get("/provisioning-jobs", headers=api).content)
        ev.add("GET /openapi.json", c.get("/openapi.json").content)
        form = c.get("/ui/sign-in").text
        csrf = re.search(r'name="csrf" value="([^"]+)"', form)
        assert csrf, form
        r = c.post("/ui/sign-in", data={"token": token, "csrf": csrf.group(1)}, follow_redirects=False)
        assert r.status_code == 303, r.text
        page = c.get(f"/ui/jobs/{job_id}")
        assert page.status_code == 200
        ev.add("dashboard job page", page.content)
        ev.add("dashboard jobs list", c.get("/ui/jobs").content)
        with c.stream("GET", f"/ui/jobs/{job_id}/events") as events:
            ev.add("dashboard live events", b"".join(events.iter_bytes()))
    # What the pages show is the reference.
    html = page.text
    for ref in re.findall(r'"secret": "([^"]+)"', json.dumps(job.json()["config"]["spec"]["runtime"])):
        assert f"🔒 <code>{ref}</code>" in html, ref


def unpacked(script: str, depth: int = 0) -> list[bytes]:
    """Each base64 run of a script decoded (and gunzipped when it is gzip): the push ships files so."""
    out = []
    for run in re.findall(r"[A-Za-z0-9+/]{16,}={0,2}", script):
        try:
            data = base64.b64decode(run, validate=True)
        except ValueError:
            continue
        data = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
        out.append(data)
        if depth < 3:  # a script inside a script (GCP's mailbox holds the push script in base64)
            out += unpacked(data.decode("utf-8", "replace"), depth + 1)
    return out


def sent_to_vms_aws(sb: Sandbox, job: dict[str, Any], ev: Evidence) -> None:
    ec2, ssm = sb.client("ec2"), sb.client("ssm")
    for vm in job["config"]["infra"]["VMs"]:
        for cmd in ssm.list_commands(InstanceId=vm["ID"])["Commands"]:
            ev.add(f"SSM command to {vm['Name']}", json.dumps(cmd, default=str))
            for n, blob in enumerate(unpacked(" ".join(cmd["Parameters"]["commands"]))):
                ev.add(f"SSM command to {vm['Name']}, blob {n} decoded", blob)
    templates = ec2.describe_launch_templates(Filters=[{"Name": "tag:zop:jobId", "Values": [job["id"]]}])[
        "LaunchTemplates"
    ]
    for lt in templates:
        for v in ec2.describe_launch_template_versions(LaunchTemplateId=lt["LaunchTemplateId"])[
            "LaunchTemplateVersions"
        ]:
            ev.add(f"launch template {lt['LaunchTemplateName']} v{v['VersionNumber']}", json.dumps(v, default=str))
            if data := v["LaunchTemplateData"].get("UserData"):
                ev.add(f"user data of {lt['LaunchTemplateName']}", base64.b64decode(data))


def sent_to_vms_gcp(sb: Sandbox, job: dict[str, Any], ev: Evidence) -> None:
    from tests.integration.gcp_inventory import Gcp, job_resources

    ev.add(
        "GCP resources of the job (metadata included)",
        json.dumps(job_resources(Gcp(sb.gcp_endpoint), job["id"]), default=str),
    )


@pytest.mark.sandbox
@pytest.mark.parametrize("cloud", ["aws", "gcp"])
def test_planted_secrets_appear_nowhere_vmplane_writes(
    sandbox: Sandbox, tmp_path: Path, collector: Collector, cloud: str
) -> None:
    uid = uuid.uuid4().hex[:8]
    planted = plant_aws(sandbox, uid) if cloud == "aws" else plant_gcp(sandbox, uid)
    home = tmp_path / "home"
    cli = Observed(
        home=home,
        sandbox_port=sandbox.port,
        gcp_port=sandbox.gcp_port,
        otlp=f"http://127.0.0.1:{collector.server_port}",
    )
    env_file = write_env(tmp_path, f"itest-leak-{cloud}", example=planted.example, runtime=planted.runtime)
    assert "secret" in env_file.read_text() and not Evidence([("file", env_file.read_bytes())]).found(planted.markers)
    ev = Evidence()

    for name, args in (
        ("validate", ["validate", "-f", str(env_file)]),
        ("plan", ["plan", "-f", str(env_file), "--sandbox"]),
    ):
        proc = cli.run(*args, "--output", "json")
        assert proc.returncode == 0, proc.stderr
        ev.proc(name, proc)
    proc = cli.run("apply", "-f", str(env_file), "--sandbox", "--yes", "--output", "json", timeout=600)
    ev.proc("apply", proc)
    assert proc.returncode == 0, proc.stderr[-4000:]
    job = json.loads(proc.stdout)
    assert job["status"] == "succeeded", job["error"]
    # The record holds the references as written.
    assert job["config"]["spec"]["runtime"]["env"]["DB_PASSWORD"] == planted.runtime["env"]["DB_PASSWORD"]
    sandboxed = ["--sandbox"] if cloud == "aws" else []
    for name, args in (
        ("status", ["status", job["id"]]),
        ("status -o json", ["status", job["id"], "--output", "json"]),
        ("jobs -o json", ["jobs", "--output", "json"]),
        # The GCP stack has no sandbox form (the sandbox's Terraform target is AWS only).
        ("tf generate", ["tf", "generate", "-f", str(env_file), "-d", str(tmp_path / "stack"), *sandboxed]),
    ):
        proc = cli.run(*args)
        assert proc.returncode == 0, f"{name}: {proc.stderr[-2000:]}"
        ev.proc(name, proc)
    assert ev.tree("tf generate", tmp_path / "stack") > 0
    through_the_server(cli, job["id"], ev)
    (sent_to_vms_aws if cloud == "aws" else sent_to_vms_gcp)(sandbox, job, ev)
    if cloud == "aws":
        # What the VMs were sent holds the references: the push was searched, and it carried them. (GCP's
        # exec mailbox is cleared once the guest answers, so after the job there is no script to read.)
        sent = b"".join(data for where, data in ev.items if where.startswith("SSM command"))
        for ref in secret_names(planted.runtime):
            assert ref.encode() in sent, f"{ref} not in what the VMs were sent"
    else:
        assert gcp_payload_reads(sandbox, planted.runtime) == {name: 1 for name in secret_names(planted.runtime)}

    proc = cli.run("destroy", "--job", job["id"], "--sandbox", "--yes", "--output", "json", timeout=600)
    ev.proc("destroy", proc)
    assert proc.returncode == 0 and json.loads(proc.stdout)["status"] == "deleted", proc.stderr[-2000:]

    listed = ev.tree("VMPLANE_HOME", home)
    assert {"vmplane.db", "dbos.sqlite", "serve.log"} <= {p.name for p in home.iterdir()}, listed
    for body in collector.bodies:
        ev.add("OTLP export", body)
    assert collector.bodies, "no trace was exported: the traces were not searched"
    # The debug logs ran: what was searched holds the references (so the runtime block went through).
    assert any(b"secret" in data for where, data in ev.items if where.startswith("VMPLANE_HOME/vmplane.db"))
    assert ev.found(planted.markers) == []


# -- a Proxmox env: value: never in a store, read at push time and redacted -----------------------


def test_an_env_value_remembered_by_the_push_is_masked_in_every_log_line() -> None:
    """The push helper reads `env:VAR` at push time and calls `redact.remember` on it: from then on no
    log line of the process can show it, wherever it would appear (a message, an argument, an error)."""
    from vmplane.observe import logs, redact

    value = f"pve-env-{uuid.uuid4().hex}"
    stream = io.StringIO()
    logs.configure("json", "debug", stream)
    try:
        log = logs.get("vmplane.test.leak")
        log.info("before remember: %s", value)  # the control: an unknown value is not masked
        redact.remember([value])
        log.info("pushing DB_PASSWORD=%s to vm-0", value)
        log.warning("guest agent said: %s", f"error near {value!r}")
        try:
            raise RuntimeError(f"exec failed with {value}")
        except RuntimeError:
            log.exception("push failed")
    finally:
        logs.reset()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 4 and value in lines[0]
    assert all(value not in ln and redact.MASK in ln for ln in lines[1:]), lines[1:]


def test_job_scope_remembers_plain_runtime_values_only() -> None:
    from vmplane.pipeline.job_scope import runtime_secrets

    config = {
        "spec": {
            "runtime": {
                "env": {"DB_PASSWORD": {"secret": "env:DB_PASSWORD"}, "PLAIN": "plain-value-1"},
                "files": {"/etc/a.pem": {"secret": "aws-sm:a"}, "/etc/b.conf": "b=2"},
            }
        }
    }
    # A reference is no value to mask (logs name it so a reader can find the secret); plain ones are.
    assert runtime_secrets(config) == ["plain-value-1", "b=2"]
    assert runtime_secrets({}) == []
