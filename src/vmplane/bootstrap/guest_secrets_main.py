#!/usr/bin/env python3
"""vmplane's secret fetcher: the VM reads its own secrets with its own identity.

Shipped to the VM as text by the runtime push (bootstrap/runtime.py) and re-run at every boot by
`vmplane-secrets.service`. Standard library only, python3.8+ (no control-plane package on the VM).

    fetch-secrets PLAN.json

The plan holds references only: `{"source": {...}, "envPath": ..., "plainEnv": {...}, "env": {VAR: ref},
"files": {PATH: ref}, "root": ""}`, a ref being `{"ref", "store", "name", "version", "jsonKey"}`. The env
file (plainEnv + the fetched env values) and each secret file are written 0600, every one first to a
temporary file beside its target and then renamed over it, only when its content or mode differs; each
changed path is printed. Errors name the field and the reference, never a value.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

DEADLINE_S = 60.0  # for the whole run; a plan may say otherwise ("deadlineSeconds")
TIMEOUT_S = 10.0
TMP_SUFFIX = ".vmplane-tmp"
# The metadata servers are link-local: never through a proxy the environment may name.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_DEFAULT = urllib.request.build_opener()


class FetchError(Exception):
    """What went wrong, naming the reference and never a value."""


class HttpError(Exception):
    """An HTTP status and the store's error code, or why the endpoint could not be reached."""


def _error_code(body: bytes) -> str:
    """The store's error code (AWS `__type`, Google `error.status`), never the body itself."""
    try:
        doc = json.loads(body.decode("utf-8"))
    except ValueError:
        return ""
    if not isinstance(doc, dict):
        return ""
    err = doc.get("error")
    code = doc.get("__type") or (err.get("status") if isinstance(err, dict) else "")
    return f" {str(code).rsplit('#', 1)[-1]}" if code else ""


def request(
    method: str,
    url: str,
    headers: dict[str, str],
    body: bytes | None = None,
    *,
    deadline: float,
    direct: bool = False,
    denied_is_transient: bool = False,
) -> bytes:
    """The response body; retried with backoff on 429, 5xx and connection errors until `deadline`
    (time.monotonic()); any other HTTP error fails at once. `denied_is_transient`: a refused read is
    retried too, since a grant made just before (the push's own stepCreateIAM) takes a while to reach
    the store (seconds on AWS, up to minutes on Google Cloud)."""
    opener = _DIRECT if direct else _DEFAULT
    delay = 0.5
    while True:
        req = urllib.request.Request(url, data=body, headers=headers, method=method)
        try:
            with opener.open(req, timeout=TIMEOUT_S) as resp:
                data: bytes = resp.read()
                return data
        except urllib.error.HTTPError as err:
            code = _error_code(err.read())
            why = f"HTTP {err.code}{code}"
            denied = err.code == 403 or code.strip() == "AccessDeniedException"
            if err.code != 429 and err.code < 500 and not (denied and denied_is_transient):
                raise HttpError(why) from None
        except (urllib.error.URLError, OSError) as err:
            why = f"cannot connect ({getattr(err, 'reason', err)})"
        if time.monotonic() + delay > deadline:
            raise HttpError(f"{why}, still failing at the deadline")
        time.sleep(delay)
        delay = min(delay * 2, 8.0)


# --- AWS: IMDSv2 role credentials and SigV4 ---------------------------------------------------------


def aws_credentials(imds: str, deadline: float) -> dict[str, str]:
    token = request(
        "PUT",
        f"{imds}/latest/api/token",
        {"X-aws-ec2-metadata-token-ttl-seconds": "300"},
        b"",
        deadline=deadline,
        direct=True,
    ).decode()
    auth = {"X-aws-ec2-metadata-token": token}
    base = f"{imds}/latest/meta-data/iam/security-credentials/"
    role = request("GET", base, auth, deadline=deadline, direct=True).decode().split()[0]
    doc = json.loads(request("GET", base + role, auth, deadline=deadline, direct=True).decode())
    return {"key": doc["AccessKeyId"], "secret": doc["SecretAccessKey"], "token": doc.get("Token", "")}


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def sigv4_headers(
    creds: dict[str, str], region: str, service: str, url: str, target: str, body: bytes, now: datetime.datetime
) -> dict[str, str]:
    """The headers of a signed AWS JSON 1.1 POST (Signature Version 4, header form)."""
    parts = urllib.parse.urlsplit(url)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    headers = {
        "content-type": "application/x-amz-json-1.1",
        "host": parts.netloc,
        "x-amz-date": amz_date,
        "x-amz-target": target,
    }
    if creds.get("token"):
        headers["x-amz-security-token"] = creds["token"]
    signed = ";".join(sorted(headers))
    canonical = "\n".join(
        [
            "POST",
            parts.path or "/",
            "",
            "".join(f"{k}:{headers[k].strip()}\n" for k in sorted(headers)),
            signed,
            hashlib.sha256(body).hexdigest(),
        ]
    )
    scope = f"{amz_date[:8]}/{region}/{service}/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + creds["secret"]).encode()
    for step in (amz_date[:8], region, service, "aws4_request"):
        key = _hmac(key, step)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={creds['key']}/{scope}, SignedHeaders={signed}, Signature={signature}"
    )
    return headers


class Aws:
    def __init__(self, source: dict[str, Any], deadline: float) -> None:
        self.region = source["region"]
        ends = source.get("endpoints") or {}
        self.imds = ends.get("imds") or "http://169.254.169.254"
        self.urls = {
            "secretsmanager": ends.get("secretsmanager") or f"https://secretsmanager.{self.region}.amazonaws.com",
            "ssm": ends.get("ssm") or f"https://ssm.{self.region}.amazonaws.com",
        }
        self.deadline = deadline
        self._creds: dict[str, str] | None = None

    def _call(self, service: str, target: str, payload: dict[str, Any]) -> dict[str, Any]:
        if self._creds is None:
            try:
                self._creds = aws_credentials(self.imds, self.deadline)
            except (HttpError, KeyError, ValueError, IndexError) as err:
                raise FetchError(f"no role credentials from the instance metadata service: {err}") from None
        url = self.urls[service].rstrip("/") + "/"
        body = json.dumps(payload).encode()
        now = datetime.datetime.now(datetime.timezone.utc)  # noqa: UP017 (datetime.UTC is 3.11+)
        headers = sigv4_headers(self._creds, self.region, service, url, target, body, now)
        raw = request("POST", url, headers, body, deadline=self.deadline, denied_is_transient=True)
        doc: dict[str, Any] = json.loads(raw.decode())
        return doc

    def read(self, ref: dict[str, Any]) -> bytes:
        if ref["store"] == "aws-ssm":
            name = ref["name"] + (f":{ref['version']}" if ref.get("version") else "")
            doc = self._call("ssm", "AmazonSSM.GetParameter", {"Name": name, "WithDecryption": True})
            return str(doc["Parameter"]["Value"]).encode()
        doc = self._call("secretsmanager", "secretsmanager.GetSecretValue", {"SecretId": ref["name"]})
        if "SecretString" in doc:
            return str(doc["SecretString"]).encode()
        return base64.b64decode(doc["SecretBinary"])


# --- GCP: the metadata server's token and Secret Manager v1 ---------------------------------------


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), what Secret Manager's dataCrc32c holds; zlib only has plain CRC-32."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


class Gcp:
    def __init__(self, source: dict[str, Any], deadline: float) -> None:
        self.project = source["project"]
        ends = source.get("endpoints") or {}
        self.metadata = ends.get("metadata") or "http://metadata.google.internal"
        self.url = (ends.get("secretmanager") or "https://secretmanager.googleapis.com").rstrip("/")
        self.deadline = deadline
        self._token: str | None = None

    def read(self, ref: dict[str, Any]) -> bytes:
        if self._token is None:
            url = f"{self.metadata}/computeMetadata/v1/instance/service-accounts/default/token"
            try:
                raw = request("GET", url, {"Metadata-Flavor": "Google"}, deadline=self.deadline, direct=True)
                self._token = str(json.loads(raw.decode())["access_token"])
            except (HttpError, KeyError, ValueError) as err:
                raise FetchError(f"no access token from the metadata server: {err}") from None
        name = ref["name"] if ref["name"].startswith("projects/") else f"projects/{self.project}/secrets/{ref['name']}"
        url = f"{self.url}/v1/{name}/versions/{ref.get('version') or 'latest'}:access"
        auth = {"Authorization": f"Bearer {self._token}"}
        doc = json.loads(request("GET", url, auth, deadline=self.deadline, denied_is_transient=True))
        payload = doc["payload"]
        data = base64.b64decode(payload.get("data", ""))
        if "dataCrc32c" in payload and int(payload["dataCrc32c"]) != crc32c(data):
            raise FetchError("the payload does not match its dataCrc32c")
        return data


# --- the plan ------------------------------------------------------------------------------------


def _value(raw: bytes, ref: dict[str, Any]) -> bytes:
    """The part of the secret the reference names: the whole, or one key of a JSON secret."""
    key = ref.get("jsonKey")
    if not key:
        return raw
    try:
        doc = json.loads(raw.decode("utf-8"))
    except ValueError:
        raise FetchError(f"is not a JSON object, so #{key} cannot be picked") from None
    if not isinstance(doc, dict) or key not in doc:
        raise FetchError(f"has no key {key!r}")
    picked = doc[key]
    return (picked if isinstance(picked, str) else json.dumps(picked)).encode()


def _env_text(var: str, value: bytes) -> str:
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        raise FetchError(f"runtime.env.{var}: the value is not UTF-8 text") from None
    if "\n" in text or "\r" in text or "\0" in text:
        raise FetchError(f"runtime.env.{var}: the value spans lines; the env file holds one KEY=value per line")
    return text


def fetch_all(plan: dict[str, Any], deadline: float) -> list[tuple[str, bytes]]:
    """(path, content) of the env file and every secret file, all read before anything is written."""
    source = plan.get("source") or {}
    cloud = source.get("cloud")
    readers: dict[str, Callable[[dict[str, Any], float], Any]] = {"aws": Aws, "gcp": Gcp}
    if cloud not in readers:
        raise FetchError(f"the plan's source names no cloud this fetcher reads ({cloud!r})")
    store = readers[cloud](source, deadline)
    cache: dict[tuple[str, str, str], bytes] = {}

    def read(field: str, ref: dict[str, Any]) -> bytes:
        what = (ref["store"], ref["name"], str(ref.get("version") or ""))
        try:
            if what not in cache:
                cache[what] = store.read(ref)
            return _value(cache[what], ref)
        except (FetchError, HttpError) as err:
            raise FetchError(f"{field} ({ref.get('ref', ref['name'])}): {err}") from None
        except (KeyError, ValueError, TypeError):
            raise FetchError(f"{field} ({ref.get('ref', ref['name'])}): the store's answer has no value") from None

    env = dict(plan.get("plainEnv") or {})
    for var, ref in sorted((plan.get("env") or {}).items()):
        env[var] = _env_text(var, read(f"runtime.env.{var}", ref))
    root = plan.get("root") or ""
    out = [(root + plan["envPath"], "".join(f"{k}={v}\n" for k, v in sorted(env.items())).encode())]
    for path, ref in sorted((plan.get("files") or {}).items()):
        out.append((root + path, read(f'runtime.files["{path}"]', ref)))
    return out


def _unchanged(target: Path, content: bytes) -> bool:
    try:
        return target.read_bytes() == content and (target.stat().st_mode & 0o7777) == 0o600
    except OSError:
        return False


def write_all(targets: list[tuple[str, bytes]]) -> list[str]:
    """Write what changed: every temporary file first, then the renames, so a failure leaves the old files."""
    todo = [(Path(path), content) for path, content in targets if not _unchanged(Path(path), content)]
    staged: list[tuple[Path, Path]] = []
    try:
        for path, content in todo:
            path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            tmp = path.with_name(path.name + TMP_SUFFIX)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            staged.append((tmp, path))
            with os.fdopen(fd, "wb") as f:
                os.fchmod(f.fileno(), 0o600)  # whatever the umask
                f.write(content)
                f.flush()
                os.fsync(f.fileno())
    except OSError:
        for tmp, _ in staged:
            tmp.unlink()
        raise
    for tmp, path in staged:
        tmp.replace(path)
    return [str(path) for _, path in staged]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: fetch-secrets PLAN.json", file=sys.stderr)
        return 2
    try:
        plan = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
        budget = float(plan.get("deadlineSeconds") or DEADLINE_S)
        for path in write_all(fetch_all(plan, time.monotonic() + budget)):
            print(path)
    except FetchError as err:
        print(f"vmplane-secrets: {err}", file=sys.stderr)
        return 1
    except OSError as err:  # paths and the OS's reason, which hold no value
        print(f"vmplane-secrets: {err}", file=sys.stderr)
        return 1
    except Exception as err:  # its message might quote a value: the type only
        print(f"vmplane-secrets: unexpected {type(err).__name__}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
