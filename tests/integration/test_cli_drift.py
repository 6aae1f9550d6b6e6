"""`vmplane drift` and `--refresh` where no cloud is read: what they refuse, before anything is recorded.
The drift each cloud finds and repairs is tested per cloud (test_*_drift*.py)."""

from __future__ import annotations

import pytest
from tests.helpers import Cli, Sandbox, write_env


def test_drift_of_an_environment_without_a_job_names_it(cli: Cli, tmp_path) -> None:
    proc = cli.run("drift", "nosuch")
    assert proc.returncode == 2 and "nosuch" in proc.stderr and proc.stdout == ""
    env_file = write_env(tmp_path, "drift-nojob")
    proc = cli.run("drift", "-f", str(env_file), "--sandbox")
    assert proc.returncode == 2 and "acme/drift-nojob has no job on the sandbox" in proc.stderr


@pytest.mark.sandbox
@pytest.mark.parametrize("command", ["plan", "apply"])
def test_refresh_takes_true_or_false_and_a_typo_records_nothing(cli: Cli, sandbox: Sandbox, tmp_path, command) -> None:
    env_file = write_env(tmp_path, f"drift-flag-{command}")
    yes = ["--yes"] if command == "apply" else []
    proc = cli.run(command, "-f", str(env_file), "--sandbox", *yes, "--refresh", "no")
    assert proc.returncode == 2 and "--refresh must be true or false, not 'no'" in proc.stderr, proc.stderr
    assert cli.json("jobs")["jobs"] == []
