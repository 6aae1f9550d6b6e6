"""How vmplane finds a cloud plugin, each in a fresh process (the loader runs once per process): the
`vmplane.clouds` entry-point group of an installed distribution, a broken entry point named in the error,
and nothing imported when nothing is configured."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.toycloud.test_toy_cli import ROOT

PROBE = """
import sys
from vmplane.clouds import registry
from vmplane.errors import VmplaneError
try:
    print(registry.descriptor_for(sys.argv[1]).name)
except VmplaneError as err:
    print("error:", err)
print("loaded:", sorted(m for m in sys.modules if m.startswith("tests.toycloud")))
"""


def installed(tmp_path: Path, entry_points: str) -> Path:
    """A distribution's metadata on a path entry, as pip leaves it (importlib.metadata reads only this)."""
    info = tmp_path / "site" / "toyplugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toyplugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(entry_points)
    return info.parent


def probe(cloud: str, *paths: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VMPLANE_")}
    env["PYTHONPATH"] = os.pathsep.join([*map(str, paths), str(ROOT), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", PROBE, cloud], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_an_entry_point_of_an_installed_distribution_adds_its_cloud(tmp_path: Path) -> None:
    site = installed(tmp_path, "[vmplane.clouds]\ntoy = tests.toycloud.plugin:register\n")
    out = probe("toy", site)
    assert out.splitlines()[0] == "toy"
    assert "'tests.toycloud.plugin'" in out


def test_a_broken_entry_point_is_named_with_its_group(tmp_path: Path) -> None:
    site = installed(tmp_path, "[vmplane.clouds]\nbad = no_such_cloud_module:register\n")
    first = probe("aws", site).splitlines()[0]
    assert first.startswith(
        "error: cloud plugin 'no_such_cloud_module:register' (entry point 'bad' in group 'vmplane.clouds') "
        "failed to import: ModuleNotFoundError"
    ), first


def test_nothing_configured_imports_no_plugin_and_knows_only_the_shipped_clouds() -> None:
    out = probe("toy").splitlines()
    assert out[0].startswith("error: provider.cloud 'toy' is not a known cloud (aws, azure, gcp, proxmox)")
    assert out[1] == "loaded: []"


def test_a_recorded_target_on_a_plugins_cloud_loads_the_plugin_first() -> None:
    """A job read back from the store names its cloud before anything looked one up (`Cloud._missing_`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VMPLANE_")}
    env.update(VMPLANE_CLOUD_PLUGINS="tests.toycloud.plugin")
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{env.get('PYTHONPATH', '')}"
    code = (
        "from vmplane.target import Target; "
        't = Target.model_validate_json(\'{"cloud": "toy", "region": "toy-1"}\'); print(t.cloud.value)'
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "toy"), done.stderr
