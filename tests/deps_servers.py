"""Local fakes of the repositories `vmplane deps download` reads, on one 127.0.0.1 HTTP server: Debian-
and Ubuntu-style apt archives (InRelease, Packages.xz, small .deb-named files), an AL2023-style dnf
repository (mirror.list, repomd.xml, primary.xml.gz) and a Docker registry (a Bearer token endpoint, an
OCI index, platform manifests). `mirrors()` is the VMPLANE_DEPS_MIRRORS value that points vmplane there."""

from __future__ import annotations

import gzip
import hashlib
import json
import lzma
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

TOKEN = "fake-anonymous-token"
NGINX_TAG = "1.27.3-alpine"
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
RELEASE_DATE = "Sat, 09 Nov 2024 10:41:21 UTC"


@dataclass(frozen=True)
class Deb:
    name: str
    version: str
    depends: str = ""
    component: str = "main"

    def filename(self, arch: str) -> str:
        return f"pool/{self.component}/{self.name[0]}/{self.name}/{self.name}_{self.version.split(':')[-1]}_{arch}.deb"

    def content(self, arch: str) -> bytes:
        return f"fake deb {self.name} {self.version} {arch}\n".encode()


@dataclass(frozen=True)
class Rpm:
    name: str
    ver: str
    rel: str
    epoch: str = "0"

    def href(self, arch: str) -> str:
        return f"Packages/{self.name}-{self.ver}-{self.rel}.{arch}.rpm"

    def content(self, arch: str) -> bytes:
        return f"fake rpm {self.name} {self.ver}-{self.rel} {arch}\n".encode()


# What the fakes serve: the newest of each wins (containerd from bookworm, runc from bookworm-security).
BOOKWORM = [
    Deb(
        "docker.io", "20.10.24+dfsg1-1+deb12u1+b6", "libc6 (>= 2.34), containerd (>= 1.4~), runc (>= 1.0.0~rc8~), tini"
    ),
    Deb("containerd", "1.6.20~ds1-1+deb12u3", "runc (>= 0.1.0~)"),
    Deb("runc", "1.1.5+ds1-1+deb12u1"),
    Deb("tini", "0.19.0-1+b3"),
    Deb("unrelated", "1.0-1"),
]
BOOKWORM_SECURITY = [Deb("containerd", "1.6.20~ds1-1+deb12u2"), Deb("runc", "1.1.5+ds1-1+deb12u2")]
NOBLE = [
    Deb("docker.io", "24.0.7-0ubuntu4", "adduser, containerd (>= 1.2.6-0ubuntu1~), iptables", "universe"),
    Deb("containerd", "1.7.12-0ubuntu4", "runc", "main"),
    Deb("runc", "1.1.12-0ubuntu3", "", "main"),
]
NOBLE_UPDATES = [Deb("docker.io", "26.1.3-0ubuntu1~24.04.1", "containerd, iptables", "universe")]
AL2023_RPMS = [
    Rpm("docker", "25.0.8", "1.amzn2023.0.1"),
    Rpm("containerd", "1.7.25", "1.amzn2023.0.1"),
    Rpm("containerd", "1.7.27", "1.amzn2023.0.1"),
    Rpm("runc", "1.2.4", "1.amzn2023.0.1"),
]
AL2023_RELEASEVER = "2023.6.20241212"


@dataclass
class Fake:
    """The server's files (path -> bytes, mutable by tests), and the paths requested."""

    port: int = 0
    files: dict[str, bytes] = field(default_factory=dict)
    headers: dict[str, dict[str, str]] = field(default_factory=dict)
    hits: list[str] = field(default_factory=list)
    fail_once: dict[str, int] = field(default_factory=dict)  # path -> the status its next request gets

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def mirrors(self, **override: str) -> str:
        names = ("debian", "debian-security", "ubuntu", "ubuntu-security", "ubuntu-ports", "al2023", "registry")
        return json.dumps({**{n: f"{self.url}/{n}" for n in names}, **override})

    def downloads(self, suffix: str) -> list[str]:
        return [h for h in self.hits if h.endswith(suffix)]


def closed_mirrors() -> dict[str, str]:
    """An environment whose VMPLANE_DEPS_MIRRORS all point at a port nobody listens on: a real `plan`,
    `apply` or `tf generate` there finds every source unreachable at once, and never tries the internet."""
    return {"VMPLANE_DEPS_MIRRORS": Fake(port=9).mirrors()}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def add_apt_suite(fake: Fake, prefix: str, suite: str, arch: str, debs: list[Deb]) -> None:
    indexes = {}
    for component in ("main", "universe"):
        stanzas = []
        for d in (d for d in debs if d.component == component):
            content = d.content(arch)
            fake.files[f"/{prefix}/{d.filename(arch)}"] = content
            depends = f"Depends: {d.depends}\n" if d.depends else ""
            stanzas.append(
                f"Package: {d.name}\nVersion: {d.version}\nArchitecture: {arch}\n{depends}"
                f"Description: {d.name}\n a fake\nFilename: {d.filename(arch)}\nSize: {len(content)}\n"
                f"SHA256: {sha(content)}\n"
            )
        packages = lzma.compress("\n".join(stanzas).encode())
        path = f"{component}/binary-{arch}/Packages.xz"
        fake.files[f"/{prefix}/dists/{suite}/{path}"] = packages
        indexes[path] = packages
    sums = "".join(f" {sha(b)} {len(b)} {p}\n" for p, b in indexes.items())
    release = f"Origin: Fake\nSuite: {suite}\nDate: {RELEASE_DATE}\nSHA256:\n{sums}"
    signed = (
        "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA512\n\n"
        f"{release}-----BEGIN PGP SIGNATURE-----\n\nnot checked\n-----END PGP SIGNATURE-----\n"
    )
    fake.files[f"/{prefix}/dists/{suite}/InRelease"] = signed.encode()


def add_al2023(fake: Fake, arch: str) -> None:
    base = f"/al2023-repo/{AL2023_RELEASEVER}/{arch}"
    fake.files[f"/al2023/latest/{arch}/mirror.list"] = f"{fake.url}{base}\n".encode()
    entries = []
    for r in AL2023_RPMS:
        content = r.content(arch)
        fake.files[f"{base}/{r.href(arch)}"] = content
        entries.append(
            f'<package type="rpm"><name>{r.name}</name><arch>{arch}</arch>'
            f'<version epoch="{r.epoch}" ver="{r.ver}" rel="{r.rel}"/>'
            f'<checksum type="sha256" pkgid="YES">{sha(content)}</checksum>'
            f'<size package="{len(content)}" installed="1" archive="1"/><location href="{r.href(arch)}"/></package>'
        )
    primary = gzip.compress(
        (
            '<?xml version="1.0"?><metadata xmlns="http://linux.duke.edu/metadata/common" '
            f'xmlns:rpm="http://linux.duke.edu/metadata/rpm" packages="{len(entries)}">{"".join(entries)}</metadata>'
        ).encode()
    )
    href = f"repodata/{sha(primary)}-primary.xml.gz"
    fake.files[f"{base}/{href}"] = primary
    fake.files[f"{base}/repodata/repomd.xml"] = (
        '<?xml version="1.0"?><repomd xmlns="http://linux.duke.edu/metadata/repo"><revision>1733961600</revision>'
        f'<data type="primary"><checksum type="sha256">{sha(primary)}</checksum>'
        f'<location href="{href}"/></data></repomd>'
    ).encode()


def add_registry(fake: Fake) -> dict[str, str]:
    """An nginx index for linux/amd64 and linux/arm64/v8; returns the platform manifests' digests."""
    digests, entries = {}, []
    for arch, variant in (("amd64", None), ("arm64", "v8"), ("386", None)):
        manifest = json.dumps({"schemaVersion": 2, "mediaType": MANIFEST_TYPE, "arch": arch}).encode()
        digest = f"sha256:{sha(manifest)}"
        digests[arch] = digest
        fake.files[f"/registry/v2/library/nginx/manifests/{digest}"] = manifest
        fake.headers[f"/registry/v2/library/nginx/manifests/{digest}"] = {"Docker-Content-Digest": digest}
        platform = {"os": "linux", "architecture": arch, **({"variant": variant} if variant else {})}
        entries.append({"mediaType": MANIFEST_TYPE, "digest": digest, "size": len(manifest), "platform": platform})
    index = json.dumps({"schemaVersion": 2, "mediaType": INDEX_TYPE, "manifests": entries}).encode()
    fake.files[f"/registry/v2/library/nginx/manifests/{NGINX_TAG}"] = index
    fake.headers[f"/registry/v2/library/nginx/manifests/{NGINX_TAG}"] = {
        "Docker-Content-Digest": f"sha256:{sha(index)}"
    }
    return digests


def populate(fake: Fake, arch: str = "amd64") -> None:
    """Every source for `arch` (Ubuntu's arm64 on the ports prefix, as the real archive does)."""
    ubuntu, security = ("ubuntu", "ubuntu-security") if arch == "amd64" else ("ubuntu-ports", "ubuntu-ports")
    add_apt_suite(fake, "debian", "bookworm", arch, BOOKWORM)
    add_apt_suite(fake, "debian", "bookworm-updates", arch, [])
    add_apt_suite(fake, "debian-security", "bookworm-security", arch, BOOKWORM_SECURITY)
    add_apt_suite(fake, ubuntu, "noble", arch, NOBLE)
    add_apt_suite(fake, ubuntu, "noble-updates", arch, NOBLE_UPDATES)
    add_apt_suite(fake, security, "noble-security", arch, [])
    add_al2023(fake, {"amd64": "x86_64", "arm64": "aarch64"}[arch])
    add_registry(fake)


def _handler(fake: Fake) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            fake.hits.append(parts.path)
            if parts.path in fake.fail_once:
                return self._send(fake.fail_once.pop(parts.path), b"try again")
            if parts.path == "/registry/token":
                query = parse_qs(parts.query)
                ok = query.get("scope") == ["repository:library/nginx:pull"] and query.get("service") == ["fake"]
                return self._send(200 if ok else 400, json.dumps({"token": TOKEN}).encode() if ok else b"{}")
            if parts.path.startswith("/registry/v2/") and self.headers.get("Authorization") != f"Bearer {TOKEN}":
                challenge = (
                    f'Bearer realm="{fake.url}/registry/token",service="fake",scope="repository:library/nginx:pull"'
                )
                return self._send(401, b"{}", {"WWW-Authenticate": challenge})
            body = fake.files.get(parts.path)
            if body is None:
                return self._send(404, b"not found")
            self._send(200, body, fake.headers.get(parts.path, {}))

        def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

    return Handler


@contextmanager
def serve(arch: str = "amd64") -> Iterator[Fake]:
    """A fake with every source for `arch`, serving on a free port until the block ends."""
    fake = Fake()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    fake.port = server.server_address[1]
    populate(fake, arch)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
