"""What `vmplane proxmox init-node` does, as the `pvesh`/`qm`/`pveum` commands a root shell on the node
would run: the options, the cloud-image table, the checksum, and the steps rendered as one POSIX script.

The same steps run over the API with `--apply` (`node_init.py`); what the API cannot do (install a
package) exists only as script lines.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from urllib.parse import urlsplit

from vmplane.clouds.errors import CloudError
from vmplane.clouds.proxmox.privileges import ACL_PATHS, PRIVILEGES, PVE8_DIFFERENCES
from vmplane.errors import UsageError

_ZONE = re.compile(r"^[a-zA-Z][a-zA-Z0-9]*[a-zA-Z0-9]$")  # PVE's pattern for an SDN zone id, 2-8 chars
_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$")  # a DNS name, as PVE wants a VM name
_ID = re.compile(r"^[A-Za-z][A-Za-z0-9._-]*$")  # a role or token name
_USER = re.compile(r"^[^\s:/@]+@[A-Za-z0-9._-]+$")
_STORAGE = re.compile(r"^[a-z][a-z0-9._-]*$", re.I)


# Why the grant is on / (propagating), and how to narrow it to the paths the privileges act on.
NARROWING = (
    "on / because vmplane acts on "
    + ", ".join(f"{path} ({prefix}*)" for prefix, path in ACL_PATHS.items())
    + "; to narrow it, split the role: the Sys.* privileges on / with --propagate 0, the others on "
    "their own paths"
)


@dataclass(frozen=True)
class CloudImage:
    url: str
    checksum_url: str  # the distribution's published SHA512SUMS / SHA256SUMS next to the image
    name: str  # the default template name


# Official cloud images (amd64); the checksum files are the distributions' own.
IMAGES: dict[str, CloudImage] = {
    "debian-12": CloudImage(
        "https://cloud.debian.org/images/cloud/bookworm/latest/debian-12-genericcloud-amd64.qcow2",
        "https://cloud.debian.org/images/cloud/bookworm/latest/SHA512SUMS",
        "debian-12-cloud",
    ),
    "ubuntu-24.04": CloudImage(
        "https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img",
        "https://cloud-images.ubuntu.com/noble/current/SHA256SUMS",
        "ubuntu-2404-cloud",
    ),
}


@dataclass(frozen=True)
class Checksum:
    algorithm: str
    value: str  # lower-case hex
    source: str  # where it came from: a checksum file's URL, or "--checksum"

    @property
    def tag(self) -> str:
        return f"{self.algorithm}:{self.value}"


def parse_checksum(text: str, source: str = "--checksum") -> Checksum:
    """`sha512:<hex>` (or sha256) -> Checksum; anything else is a usage error that names the option."""
    algorithm, _, value = text.strip().partition(":")
    lengths = {"sha256": 64, "sha512": 128}
    value = value.lower()
    if algorithm not in lengths or not re.fullmatch(rf"[0-9a-f]{{{lengths[algorithm]}}}", value):
        raise UsageError("--checksum must be sha512:<128 hex digits> or sha256:<64 hex digits>")
    return Checksum(algorithm, value, source)


def checksum_from_sums(text: str, file_name: str, source: str) -> Checksum:
    """The line of a SHA512SUMS/SHA256SUMS file (`<hex>  <name>` or `<hex> *<name>`) for `file_name`; the
    algorithm is the one the digest's length says."""
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("*") == file_name:
            algorithm = {64: "sha256", 128: "sha512"}.get(len(parts[0]), "unknown")
            return parse_checksum(f"{algorithm}:{parts[0]}", source)
    raise CloudError(f"{source} has no checksum for {file_name}", code="NoChecksum")


@dataclass(frozen=True)
class InitOptions:
    node: str
    image_url: str
    checksum_url: str | None  # None: --checksum alone pins the image
    vmid: int = 9000
    name: str = "debian-12-cloud"
    storage: str = "local-lvm"
    iso_storage: str = "local"
    bridge: str = "vmbr0"
    zone: str = "vmplane"
    user: str = "vmplane@pve"
    token_name: str = "vmplane"
    role: str = "VmplaneProvisioner"
    rotate_token: bool = False
    pve8: bool = False  # PVE 8.4 (import content exists) has VM.Monitor where PVE 9 has VM.GuestAgent.*
    # Debian's and Ubuntu's cloud images ship without qemu-guest-agent: install it into a copy of the image
    # on the node (virt-customize, root only) before the template is made from that copy.
    bake_agent: bool = True

    @property
    def privileges(self) -> tuple[str, ...]:
        """Exactly what vmplane's calls need (`privileges.py`), in PVE 8's names on a PVE 8 cluster."""
        names = {PVE8_DIFFERENCES.get(p, p) for p in PRIVILEGES} if self.pve8 else set(PRIVILEGES)
        return tuple(sorted(names))

    def check(self) -> None:
        """Refuse values PVE would refuse, naming the option (before any call)."""
        bad = [
            (not 100 <= self.vmid <= 999_999_999, "--vmid must be 100..999999999"),
            (not _NAME.fullmatch(self.name), "--name must be a DNS name (letters, digits, '-' and '.')"),
            (not _ZONE.fullmatch(self.zone) or len(self.zone) > 8, "--zone must be 2-8 letters/digits, a letter first"),
            (not _USER.fullmatch(self.user), "--user must be user@realm"),
            (not _ID.fullmatch(self.token_name), "--token-name must start with a letter (letters, digits, . _ -)"),
            (not _ID.fullmatch(self.role), "--role must start with a letter (letters, digits, . _ -)"),
            (
                not all(_STORAGE.fullmatch(s) for s in (self.storage, self.iso_storage)),
                "--storage/--iso-storage: bad id",
            ),
            (not _STORAGE.fullmatch(self.bridge), "--bridge must be a bridge or VNet name"),
            (urlsplit(self.image_url).scheme not in ("https", "http"), "--image-url must be an http(s) URL"),
        ]
        for failed, message in bad:
            if failed:
                raise UsageError(message)

    @property
    def image_file(self) -> str:
        return urlsplit(self.image_url).path.rsplit("/", 1)[-1]

    def import_file(self, checksum: Checksum) -> str:
        """The file name on the node: the image's stem, the checksum's first 12 digits (a new release of a
        `latest` image is another file, never mistaken for the one already there) and `.qcow2`, an
        extension PVE's `import` content accepts (Ubuntu's `.img` is a qcow2)."""
        stem = re.sub(r"\.(qcow2|img|raw)$", "", self.image_file) or "image"
        return f"{re.sub(r'[^A-Za-z0-9._-]', '-', stem)}-{checksum.value[:12]}.qcow2"

    def agent_file(self, checksum: Checksum) -> str:
        """The copy of the image with qemu-guest-agent installed: its existence on the storage is how
        --apply knows the root-only step ran (the script writes it last, by a rename)."""
        return self.import_file(checksum).removesuffix(".qcow2") + "-agent.qcow2"

    def template_file(self, checksum: Checksum) -> str:
        return self.agent_file(checksum) if self.bake_agent else self.import_file(checksum)

    @property
    def token_id(self) -> str:
        return f"{self.user}!{self.token_name}"


@dataclass(frozen=True)
class Command:
    key: str  # the step, as --output json and the apply outcomes name it
    title: str
    argv: tuple[str, ...]
    note: str = ""  # why, or what the command cannot do on its own

    @property
    def shell(self) -> str:
        return " ".join(shlex.quote(a) for a in self.argv)


def _argv(*groups: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(a for g in groups for a in g)


def commands(o: InitOptions, checksum: Checksum) -> list[Command]:
    """Every step as the command a root shell on the node runs, in order."""
    f, t = o.import_file(checksum), o.template_file(checksum)
    return [
        Command(
            "storage",
            f"storage {o.iso_storage} takes `import` content (cloud images for import-from)",
            ("pvesm", "set", o.iso_storage, "--content", "iso,vztmpl,backup,import"),
            "keep the storage's other content types: --apply adds only `import` to its list",
        ),
        Command(
            "image",
            f"download {o.image_file}; the node verifies its {checksum.algorithm} before keeping it",
            _argv(
                ("pvesh", "create", f"/nodes/{o.node}/storage/{o.iso_storage}/download-url", "--content", "import"),
                ("--url", o.image_url, "--filename", f, "--checksum", checksum.value),
                ("--checksum-algorithm", checksum.algorithm),
            ),
            f"checksum from {checksum.source}",
        ),
        Command(
            "vm",
            f"create VM {o.vmid} {o.name} from {'the image with the agent' if o.bake_agent else 'the image'}, "
            "guest agent on",
            _argv(
                ("qm", "create", str(o.vmid), "--name", o.name, "--memory", "1024", "--cores", "1"),
                ("--net0", f"virtio,bridge={o.bridge}", "--scsihw", "virtio-scsi-single"),
                ("--scsi0", f"{o.storage}:0,import-from={o.iso_storage}:import/{t}", "--boot", "order=scsi0"),
                ("--serial0", "socket", "--vga", "serial0", "--agent", "enabled=1", "--ostype", "l26"),
            ),
            "no cloud-init drive: vmplane attaches its own NoCloud ISO to each clone",
        ),
        Command("template", f"turn VM {o.vmid} into a template", ("qm", "template", str(o.vmid))),
        Command(
            "zone",
            f"SDN simple zone {o.zone} with PVE IPAM and dnsmasq DHCP",
            _argv(
                ("pvesh", "create", "/cluster/sdn/zones", "--type", "simple", "--zone", o.zone),
                ("--ipam", "pve", "--dhcp", "dnsmasq"),
            ),
        ),
        Command("sdn-apply", "apply the SDN configuration", ("pvesh", "set", "/cluster/sdn")),
        Command(
            "role",
            f"role {o.role} with exactly the {len(o.privileges)} privileges vmplane needs",
            ("pveum", "role", "add", o.role, "--privs", ",".join(o.privileges)),
            f"if it exists: pveum role modify {o.role} --privs <the same list>",
        ),
        Command("user", f"user {o.user} (API tokens only, no password)", ("pveum", "user", "add", o.user)),
        Command(
            "acl",
            f"grant {o.role} to {o.user} on /",
            ("pveum", "acl", "modify", "/", "--roles", o.role, "--users", o.user),
            NARROWING,
        ),
        Command(
            "token",
            f"API token {o.token_id} sharing the user's privileges",
            ("pveum", "user", "token", "add", o.user, o.token_name, "--privsep", "0"),
            "prints the secret once: export PROXMOX_TOKEN_ID and PROXMOX_TOKEN_SECRET for vmplane",
        ),
    ]


# What only a root shell on each node can do: the API has no package management.
ROOT_ONLY: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "dnsmasq serves the SDN zone's DHCP; PVE starts its own instance per zone",
        ("apt-get", "install", "-y", "dnsmasq"),
    ),
    (
        "the distribution's default instance would take port 53/67 from PVE's",
        ("systemctl", "disable", "--now", "dnsmasq"),
    ),
)


def _lines(comment: str, argv: tuple[str, ...]) -> list[str]:
    return [f"# {comment}", " ".join(shlex.quote(a) for a in argv)]


def root_script(o: InitOptions) -> str:
    """The part no API call can do, to run on every node as root."""
    out = [
        "#!/bin/sh",
        f"# vmplane proxmox init-node: run on node {o.node} (and every node of the zone) as root",
        "set -eu",
    ]
    for comment, argv in ROOT_ONLY:
        out += _lines(comment, argv)
    if o.bake_agent:
        out += _lines(
            "virt-customize installs qemu-guest-agent into the image", ("apt-get", "install", "-y", AGENT_TOOLS)
        )
    return "\n".join(out) + "\n"


AGENT_TOOLS = "libguestfs-tools"


def bake_lines(o: InitOptions, checksum: Checksum) -> list[str]:
    """Root only, after the download and before `qm create`: a copy of the image with qemu-guest-agent
    installed (the cloud images lack it, and vmplane's exec and readiness go through it). Written under
    a temporary name and renamed last, so a killed run leaves no half-made file under the final name."""
    src, dst = (shlex.quote(f"{o.iso_storage}:import/{n}") for n in (o.import_file(checksum), o.agent_file(checksum)))
    return [
        f"src=$(pvesm path {src})",
        f"dst=$(pvesm path {dst})",
        'if [ ! -e "$dst" ]; then',
        '    cp "$src" "$dst.part"',
        '    virt-customize -a "$dst.part" --install qemu-guest-agent',
        '    mv "$dst.part" "$dst"',
        "fi",
    ]


def bake_script(o: InitOptions, checksum: Checksum) -> str:
    """The root-only part --apply prints when the template waits for the image with the agent."""
    head = root_script(o).rstrip("\n").split("\n")
    return (
        "\n".join([*head, "# the image with the agent, which the template is made from", *bake_lines(o, checksum)])
        + "\n"
    )


def full_script(o: InitOptions, checksum: Checksum) -> str:
    """Every step as one POSIX script (the dry run's output): what --apply does over the API, plus the
    root-only part first, since the zone's DHCP needs dnsmasq, and the agent's install into the image."""
    out = root_script(o).rstrip("\n").split("\n")
    for n, c in enumerate(commands(o, checksum), 1):
        out.append("")
        out.append(f"# {n}. {c.title}")
        if c.note:
            out.append(f"#    {c.note}")
        out.append(c.shell)
        if c.key == "image" and o.bake_agent:
            out += ["", f"# {n}b. (root only) a copy with qemu-guest-agent installed: {o.agent_file(checksum)}"]
            out += bake_lines(o, checksum)
    return "\n".join(out) + "\n"
