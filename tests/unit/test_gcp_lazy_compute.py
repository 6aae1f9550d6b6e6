"""vmplane.clouds.gcp.lazy_compute: compute_v1 loads only what is used, and still exports every name."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import sys
    import vmplane.clouds.gcp  # installs the lazy package
    from google.cloud import compute_v1

    client, message = compute_v1.NetworksClient, compute_v1.InsertNetworkRequest
    from google.cloud.compute_v1 import gapic_version  # a submodule, as the clients import it
    loaded = sorted(m for m in sys.modules if m.startswith("google.cloud.compute_v1.services."))
    assert "google.cloud.compute_v1.services.networks" in loaded, loaded
    assert "google.cloud.compute_v1.services.accelerator_types" not in sys.modules, loaded
    try:
        compute_v1.NoSuchClient
    except AttributeError:
        pass
    else:
        raise AssertionError("a name the package does not export resolved")

    names = compute_v1.__all__  # runs the package's own __init__
    from google.cloud.compute_v1.services.networks import NetworksClient
    from google.cloud.compute_v1.types import InsertNetworkRequest
    assert (client, message) == (NetworksClient, InsertNetworkRequest)
    missing = [n for n in names if not hasattr(compute_v1, n)]
    assert not missing, missing
    assert compute_v1.__version__ == gapic_version.__version__
    print(len(names))
    """
)


def test_compute_v1_loads_only_the_clients_used_and_keeps_every_export() -> None:
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) > 1000  # every client and message type of the package
