"""The vmconfig manifests in a generated stack: copies beside the .tf files, read through Terraform.

`tf generate` copies the current manifest of every (kind, arch) the pools use as
`vmplane.env.vmconfig.<kind>.<arch>.json` (re-running replaces the copies). The user-data in
`inputs.vm.tf` holds a placeholder that `local.user_data` replaces with `base64gzip(file(copy))`, so an
edited copy shows in `terraform plan` as a user-data (template) change; `local.vmconfig_missing` lists
what a pool's copy leaves unpinned, and each pool's template carries a precondition on it while
`local.vmconfig_fail_closed` holds. A `--sandbox` stack, where nothing boots, turns that off in its override
file (`sandbox_locals`), saying in a comment what a real VM would fail closed on; a real stack keeps it.
"""

from __future__ import annotations

import re
from pathlib import Path

from vmplane.bootstrap import vmconfig
from vmplane.deps.manifest import family_of_image
from vmplane.envspec.models import BootstrapMode, EnvSpec
from vmplane.tf.hcl import Block, Expr, Item

# Where the manifest's gz+b64 text goes in the rendered user-data (a plain YAML scalar).
PLACEHOLDER = "VMPLANE_VMCONFIG_FROM_TERRAFORM"
_COPY = re.compile(r"^vmplane\.env\.vmconfig\.[a-z]+\.[a-z0-9]+\.json$")


def is_copy(path: Path) -> bool:
    """A manifest copy `tf generate` writes (and replaces when it runs again)."""
    return bool(_COPY.match(path.name))


def copies(spec: EnvSpec, home: Path | None = None) -> dict[str, str]:
    """File name -> manifest text, for every (kind, arch) the pools use. Written even when they leave a
    pool unpinned (`tf generate` warns): the copy may be edited before planning, the precondition checks it."""
    out = {}
    for name in sorted(spec.pools):
        manifest = vmconfig.pool_manifest(spec, name, home)
        out[manifest.filename] = manifest.dumps()
    return out


def pool_inputs(spec: EnvSpec, home: Path | None = None) -> dict[str, dict[str, str]]:
    """`local.vm.vmconfig`: per pool, its copy's file name, its family when the image alias names one
    ("" when known only at boot) and the bootstrap kind."""
    out = {}
    for name, pool in sorted(spec.pools.items()):
        manifest = vmconfig.pool_manifest(spec, name, home)
        kind = BootstrapMode(spec.bootstrap.mode).value
        out[name] = {"file": manifest.filename, "family": family_of_image(pool.image) or "", "kind": kind}
    return out


def add_locals(loc: Block) -> None:
    """The user-data with the copy read in, what each pool's copy leaves unpinned, and whether the
    templates' precondition refuses it (`sandbox_locals` overrides that)."""
    loc.attr("vmconfig_fail_closed", True)
    copy = 'jsondecode(file("${path.module}/${v.file}"))'
    loc.attr(
        "user_data",
        Expr(
            "{\n"
            "    for pool, text in local.vm.userData : pool => replace(\n"
            f'      text, "{PLACEHOLDER}", base64gzip(file("${{path.module}}/${{local.vm.vmconfig[pool].file}}"))\n'
            "    )\n"
            "  }"
        ),
    )
    loc.attr(
        "vmconfig_missing",
        Expr(
            "{\n"
            "    for pool, v in local.vm.vmconfig : pool => compact([\n"
            f'      v.family == "" || contains(keys(try({copy}.families, {{}})), v.family)'
            ' ? "" : "family ${v.family}",\n'
            f'      v.kind != "nginx" || contains(keys(try({copy}.images, {{}})), "nginx") ? "" : "the nginx image",\n'
            "    ])\n"
            "  }"
        ),
    )


def precondition(lifecycle: Block, pool: str = "each.key") -> None:
    """Fail `terraform plan` while the pool's copy leaves its family or the NGINX image unpinned (on a
    real stack: `local.vmconfig_fail_closed`)."""
    check = lifecycle.block("precondition")
    check.attr("condition", Expr(f"!local.vmconfig_fail_closed || length(local.vmconfig_missing[{pool}]) == 0"))
    check.attr(
        "error_message",
        Expr(
            f'"pools.${{{pool}}}.image: ${{local.vm.vmconfig[{pool}].file}} does not pin '
            f'${{join(" or ", local.vmconfig_missing[{pool}])}}, so the bootstrap would fail closed. Run '
            f"`vmplane deps download --arch ${{local.vm.pools[{pool}].arch}}` where the repositories are "
            'reachable and generate again, or edit the copy."'
        ),
    )


def sandbox_locals(spec: EnvSpec, home: Path | None = None) -> list[Item]:
    """The sandbox override's part: nothing boots there, so the precondition does not stop the apply
    (as the direct apply on the sandbox goes on); the comment names what a real VM would fail closed on."""
    found = vmconfig.unpinned(spec, home)
    lines = [
        "The sandbox boots nothing: the vmconfig precondition is off here, as the direct apply on the sandbox",
        "goes on. A real stack (generated without --sandbox) keeps it.",
    ]
    if found:
        lines.append("A real VM would fail closed on:")
        lines += [f"  {u.message()}" for u in found]
    else:
        lines.append("The copies pin what the pools need: a real VM would not fail closed on them.")
    loc = Block("locals")
    for line in lines:
        loc.comment(line)
    return [loc.attr("vmconfig_fail_closed", False)]
