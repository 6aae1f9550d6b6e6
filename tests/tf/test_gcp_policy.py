"""checkov on the generated GCP stacks: no failed check for external IPs, SSH from the world, OS Login /
project SSH keys, the serial port, Shielded VM or the default service account, and each check must have
passed on every resource it is about (a Fixed VM, a firewall rule), so the test cannot pass because
checkov skipped or did not recognise a resource. Skips where checkov is absent.

checkov 3.3 has no checks for google_compute_region_instance_template (the stack's template scope, the
same as the direct pipeline's), so the VM checks run on the Fixed instances: both cases have a Fixed
pool, whose instances the stack writes out with the same hardening as the templates
(tf/gcp/compute.py `_harden` and `metadata`; test_gcp_generate.py checks the templates carry it)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from tests.tf.test_policy import checkov

from vmplane.envspec.load import load_spec
from vmplane.tf.generate import generate, write

CASES = Path(__file__).resolve().parent / "cases"
VMS = ("google_compute_instance.vm",)  # not the regional templates: checkov has no checks for them
# check id -> (what it asserts, the resources it must have passed on)
POLICY = {
    "CKV_GCP_40": ("instances have no public IP address", VMS),
    "CKV_GCP_32": ("'Block Project-wide SSH keys' is enabled", VMS),
    "CKV_GCP_34": ("no instance overrides the project's OS Login setting", VMS),
    "CKV_GCP_35": ("connecting to serial ports is not enabled", VMS),
    "CKV_GCP_39": ("launched with Shielded VM", VMS),
    "CKV_GCP_30": ("instances do not use the default service account", VMS),
    "CKV_GCP_2": ("firewall ingress does not allow unrestricted SSH", ("google_compute_firewall.allow_iap_ssh",)),
    "CKV_GCP_41": ("no Service Account User / Token Creator role granted", ("google_project_iam_member.vm",)),
    "CKV_GCP_74": ("private Google access on the subnetwork", ("google_compute_subnetwork.vms",)),
}


def scan(exe: str, out: Path) -> dict[str, list[dict[str, str]]]:
    proc = subprocess.run(
        [exe, "-d", str(out), "--framework", "terraform", "-o", "json", "--compact", "--skip-download"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr[-2000:]  # 1: some (other) check failed
    results: dict[str, list[dict[str, str]]] = json.loads(proc.stdout)["results"]
    return results


@pytest.mark.parametrize("case", ["gcp-fixed.jsonc", "gcp-web.jsonc"])
def test_no_failed_policy_check_and_each_one_ran_on_its_resources(case: str, tmp_path: Path) -> None:
    exe = checkov()
    write(generate(load_spec(CASES / case)), tmp_path)
    results = scan(exe, tmp_path)
    failed = [(c["check_id"], c["resource"]) for c in results["failed_checks"] if c["check_id"] in POLICY]
    assert failed == [], f"{case}: {failed}"
    passed = {(c["check_id"], c["resource"].split("[")[0]) for c in results["passed_checks"]}
    for check_id, (_, on) in POLICY.items():
        for resource in on:
            assert (check_id, resource) in passed, f"{case}: {check_id} did not pass on {resource}"
