"""`vmplane proxmox`: preparing a Proxmox VE node for vmplane (`init-node`)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from vmplane.cli.common import EXIT_USAGE, OutputOpt, begin, print_json
from vmplane.errors import UsageError

if TYPE_CHECKING:
    from vmplane.clouds.proxmox.node_init import Applied, InitOptions

GROUP = "proxmox"  # as clouds/proxmox/descriptor.py names this group; also the cloud it serves
proxmox_app = typer.Typer(help="Prepare a Proxmox VE node for vmplane.", no_args_is_help=True)

Opt = typer.Option


@proxmox_app.command("init-node")
def init_node(
    endpoint: Annotated[str | None, Opt("--endpoint", help="The API, e.g. https://pve.example:8006.")] = None,
    file: Annotated[Path | None, Opt("--file", "-f", help="Take endpoint, node and caFile from this env file.")] = None,
    node: Annotated[str | None, Opt("--node", help="The node the template is made on.")] = None,
    ca_file: Annotated[str | None, Opt("--ca-file", help="PEM of the CA that signed the API's certificate.")] = None,
    image: Annotated[str, Opt("--image", help="debian-12 or ubuntu-24.04 (official cloud images).")] = "debian-12",
    image_url: Annotated[str | None, Opt("--image-url", help="Another cloud image (qcow2); needs a checksum.")] = None,
    checksum: Annotated[str | None, Opt("--checksum", help="sha512:<hex> or sha256:<hex> of the image.")] = None,
    checksum_url: Annotated[str | None, Opt("--checksum-url", help="An https SHA512SUMS/SHA256SUMS file.")] = None,
    vmid: Annotated[int, Opt("--vmid", help="The template's VMID.")] = 9000,
    name: Annotated[str | None, Opt("--name", help="The template's name (default: from --image).")] = None,
    storage: Annotated[str, Opt("--storage", help="Where the template's disk goes.")] = "local-lvm",
    iso_storage: Annotated[str, Opt("--iso-storage", help="A file storage for the downloaded image.")] = "local",
    bridge: Annotated[str, Opt("--bridge", help="The template's NIC bridge (clones get the env's).")] = "vmbr0",
    zone: Annotated[str, Opt("--zone", help="The SDN simple zone id (2-8 letters/digits).")] = "vmplane",
    user: Annotated[str, Opt("--user", help="The PVE user vmplane's token belongs to.")] = "vmplane@pve",
    token_name: Annotated[str, Opt("--token-name", help="The API token's name.")] = "vmplane",
    role: Annotated[str, Opt("--role", help="The role with vmplane's privileges.")] = "VmplaneProvisioner",
    rotate_token: Annotated[bool, Opt("--rotate-token", help="Replace an existing token (a new secret).")] = False,
    bake_agent: Annotated[
        bool,
        Opt("--bake-agent/--no-bake-agent", help="Install qemu-guest-agent into the image (root, virt-customize)."),
    ] = True,
    pve8: Annotated[bool, Opt("--pve8", help="A PVE 8.4 cluster: VM.Monitor for the guest agent.")] = False,
    apply: Annotated[bool, Opt("--apply", help="Do it over the API (admin token from PROXMOX_TOKEN_*).")] = False,
    yes: Annotated[bool, Opt("--yes", "-y", help="Needed with --apply.")] = False,
    output: OutputOpt = "text",
) -> None:
    """Make a node ready for vmplane: the template from a checksum-verified cloud image (guest agent on),
    the SDN zone, and a role with exactly vmplane's privileges plus a token for it. A dry run by default:
    prints every step as a `pvesh`/`qm`/`pveum` script."""
    from vmplane.clouds.proxmox import node_init

    cmd = begin(output)
    if apply and not yes:
        sys.stderr.write("init-node --apply changes the cluster: pass --yes as well; nothing was changed\n")
        raise typer.Exit(EXIT_USAGE)
    if image not in node_init.IMAGES and image_url is None:
        raise UsageError(f"--image must be one of {', '.join(node_init.IMAGES)} (or give --image-url)")
    source = node_init.IMAGES.get(image, node_init.IMAGES["debian-12"])
    if image_url is not None and checksum is None and checksum_url is None:
        raise UsageError("--image-url needs --checksum or --checksum-url")
    pinned = node_init.parse_checksum(checksum) if checksum else None
    verify_tls = True
    if file is not None:
        endpoint, node, ca_file, verify_tls = _from_file(file, endpoint, node, ca_file)
    if node is None:
        raise UsageError("give --node (or -f an env file with provider.node)")
    opts = node_init.InitOptions(
        node=node,
        image_url=image_url or source.url,
        checksum_url=checksum_url or (None if image_url else source.checksum_url),
        vmid=vmid,
        name=name or (source.name if image_url is None else "cloud-template"),
        storage=storage,
        iso_storage=iso_storage,
        bridge=bridge,
        zone=zone,
        user=user,
        token_name=token_name,
        role=role,
        rotate_token=rotate_token,
        pve8=pve8,
        bake_agent=bake_agent,
    )
    opts.check()
    sums = node_init.resolve_checksum(opts, pinned, node_init.fetch_https, read_file=apply)
    if not apply:
        text = node_init.full_script(opts, sums)
        if cmd.json:
            steps = [
                {"key": c.key, "title": c.title, "command": c.shell, "note": c.note}
                for c in node_init.commands(opts, sums)
            ]
            print_json({"mode": "dry-run", "checksum": sums.tag, "steps": steps, "script": text})
        else:
            sys.stdout.write(text)
        return
    if endpoint is None:
        raise UsageError("--apply needs --endpoint (or -f an env file)")
    if not endpoint.startswith("https://"):
        raise UsageError("--endpoint must be the https URL of the Proxmox VE API, like https://pve.example:8006")
    done = node_init.apply_at(endpoint, ca_file, opts, sums, verify_tls=verify_tls)
    _report(cmd.json, opts, sums.tag, done, node_init.root_script(opts))


def _from_file(file: Path, endpoint: str | None, node: str | None, ca_file: str | None) -> tuple[Any, Any, Any, bool]:
    from vmplane.cli.common import load
    from vmplane.clouds.registry import descriptor_for

    provider: Any = load(file).provider
    # This group serves the cloud whose descriptor registers it.
    cli = descriptor_for(provider.cloud).cli
    if cli is None or cli.app.module != __name__:
        raise UsageError(f"{file}: provider.cloud is not {GROUP}")
    return (
        endpoint or provider.endpoint,
        node or provider.node or (provider.nodes or [None])[0],
        ca_file or provider.ca_file,
        bool(provider.verify_tls),  # a lab's verifyTls false holds here too
    )


def _report(as_json: bool, opts: InitOptions, checksum: str, done: Applied, root: str) -> None:
    """The outcomes, the root-only script, and the token's secret once (stdout only, never a log)."""
    secret = done.token_secret
    if as_json:
        doc: dict[str, Any] = {
            "mode": "apply",
            "checksum": checksum,
            "steps": [{"key": o.key, "status": o.status, "detail": o.detail} for o in done.outcomes],
            "script": done.pending_script or root,
            "pending": bool(done.pending_script),
        }
        if secret:
            doc["token"] = {"id": opts.token_id, "secret": secret}
        print_json(doc)
        return
    out = [f"{o.status:8} {o.key:10} {o.detail}" for o in done.outcomes]
    if done.pending_script:
        out += ["", "The template waits for this: run it on the node as root, then this command again:"]
        out += [done.pending_script.rstrip("\n")]
    else:
        out += ["", "Run on the node as root (no API call installs a package):", root.rstrip("\n")]
    if secret:
        out += [
            "",
            "The token's secret, shown this once (vmplane keeps no copy):",
            f"export PROXMOX_TOKEN_ID={shlex.quote(opts.token_id)}",
            f"export PROXMOX_TOKEN_SECRET={shlex.quote(secret)}",
        ]
    sys.stdout.write("\n".join(out) + "\n")
