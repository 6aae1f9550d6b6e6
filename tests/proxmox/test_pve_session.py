"""The Proxmox session and error boundary: call names (one per API method, ids replaced), the token from
the environment (never printed), PVE's sentences mapped onto vmplane's error tree, and on fakepve: a bad
token is an AuthError without the secret, "in use" reaches teardown's retry at once (not after the
session's own 120 s of retries), each call is counted once."""

from __future__ import annotations

from collections import Counter

import pytest
from proxmoxer.core import AuthenticationError, ResourceException
from tests.proxmox.fakecluster import TOKEN_NAME, TOKEN_SECRET, TOKEN_USER, Serving
from tests.proxmox.netkit import NODES, cluster, pve

from vmplane.clouds.base import API_CALLS
from vmplane.clouds.errors import (
    AuthError,
    CloudError,
    ConflictError,
    DependencyViolationError,
    InvalidRequestError,
    NotFoundError,
    TransientError,
)
from vmplane.clouds.proxmox.errors import task_failed, translate
from vmplane.clouds.proxmox.session import Pve, PveTarget, Token, call_name, token_from_env

__all__ = ["cluster", "pve"]  # fixtures


@pytest.mark.parametrize(
    ("method", "path", "name"),
    [
        ("post", "nodes/pve1/qemu/101/clone", "POST /nodes/{node}/qemu/{vmid}/clone"),
        ("GET", "/cluster/resources", "GET /cluster/resources"),
        ("delete", "cluster/firewall/groups/vmplane-ab12/3", "DELETE /cluster/firewall/groups/{group}/{n}"),
        (
            "delete",
            "cluster/sdn/vnets/vn1/subnets/vz1-10.0.0.0-24",
            "DELETE /cluster/sdn/vnets/{vnet}/subnets/{subnet}",
        ),
        ("put", "pools/vmplane-demo-abc", "PUT /pools/{pool}"),
        (
            "delete",
            "nodes/pve2/storage/local/content/local:iso/vmplane-101-cidata.iso",
            "DELETE /nodes/{node}/storage/{storage}/content/{volume}",
        ),
        (
            "get",
            "nodes/pve1/tasks/UPID:pve1:0001:x:y:qmclone:101:root@pam:/status",
            "GET /nodes/{node}/tasks/{upid}/status",
        ),
    ],
)
def test_call_names_replace_ids_by_placeholders(method: str, path: str, name: str) -> None:
    assert call_name(method, path) == name


def test_token_from_env_names_the_variables_and_never_the_secret() -> None:
    with pytest.raises(AuthError, match="PROXMOX_TOKEN_ID") as err:
        token_from_env({})
    assert err.value.code == "NoCredentials"
    with pytest.raises(AuthError, match="user@realm!tokenname"):
        token_from_env({"PROXMOX_TOKEN_ID": "root@pam", "PROXMOX_TOKEN_SECRET": "s3cret-value"})
    token = token_from_env({"PROXMOX_TOKEN_ID": "vmplane@pve!ci", "PROXMOX_TOKEN_SECRET": "s3cret-value"})
    assert (token.user, token.name, token.id) == ("vmplane@pve", "ci", "vmplane@pve!ci")
    assert "s3cret" not in repr(token) and "s3cret" not in str(token)


def _pve_error(status: int, message: str, errors: dict[str, str] | None = None) -> ResourceException:
    return ResourceException(status, "Internal Server Error", message, errors=errors)


@pytest.mark.parametrize(
    ("status", "message", "kind"),
    [
        (500, "Configuration file 'nodes/pve1/qemu-server/101.conf' does not exist", NotFoundError),
        (500, "no such security group 'vmplane-x'", NotFoundError),
        (500, "create pool failed: pool 'p' already exists", ConflictError),
        (500, "sdn zone object ID 'vz1' already defined", ConflictError),
        (500, "VM 102 is running - destroy failed", ConflictError),
        (500, "can't lock file '/var/lock/qemu-server/lock-101.conf' - got timeout", TransientError),
        (500, "delete pool failed: pool 'p' is not empty (contains VM 101)", DependencyViolationError),
        (503, "Service Unavailable", TransientError),
        (595, "Connection refused", TransientError),
        (403, "Permission check failed (/vms/101, VM.Clone)", AuthError),
        (500, "something PVE says once", CloudError),
    ],
)
def test_pve_sentences_map_onto_the_error_tree(status: int, message: str, kind: type[CloudError]) -> None:
    err = translate(_pve_error(status, message), "X /y")
    assert type(err) is kind and message in str(err)


def test_a_parameter_error_keeps_each_fields_message() -> None:
    err = translate(_pve_error(400, "Parameter verification failed.", {"tags": "invalid characters in tag"}), "X")
    assert isinstance(err, InvalidRequestError) and "tags: invalid characters in tag" in str(err)


def test_a_refused_login_is_an_auth_error() -> None:
    assert isinstance(translate(AuthenticationError("Couldn't authenticate user"), "X"), AuthError)


def test_a_failed_task_is_classified_by_its_exit_status() -> None:
    assert isinstance(
        task_failed("clone", "unable to find configuration file for VM 9000 - no such machine", []), NotFoundError
    )
    err = task_failed("clone", "disk full", ["copying", "", "error: no space"])
    assert type(err) is CloudError and "copying / error: no space" in str(err)


def test_loopback_is_only_this_machine() -> None:
    assert PveTarget("https://127.0.0.1:8006", NODES).loopback
    assert PveTarget("https://localhost:8006", NODES).loopback
    assert not PveTarget("https://pve.example:8006", NODES).loopback
    assert not PveTarget("https://10.0.0.5:8006", NODES).loopback


def test_a_wrong_secret_is_an_auth_error_without_the_secret(cluster: Serving) -> None:
    target = PveTarget(cluster.pve.url, NODES, ca_file=cluster.cafile)  # type: ignore[attr-defined]
    wrong = Pve(target, token=Token(user=TOKEN_USER, name=TOKEN_NAME, secret="wrong-" + TOKEN_SECRET))
    with pytest.raises(AuthError) as err:
        wrong.get("nodes")
    assert TOKEN_SECRET not in str(err.value)


def test_in_use_is_raised_at_once_and_each_call_counted_once(cluster: Serving, pve: Pve) -> None:
    pve.post("pools", poolid="vmplane-session-test", comment="x")
    pve.put("pools/vmplane-session-test", vms="9000")
    tally: Counter[str] = Counter()
    token = API_CALLS.set(tally)
    try:
        with pytest.raises(DependencyViolationError):
            pve.delete("pools/vmplane-session-test")
    finally:
        API_CALLS.reset(token)
    assert tally == Counter({"DELETE /pools/{pool}": 1})
    pve.put("pools/vmplane-session-test", vms="9000", delete=1)
    pve.delete("pools/vmplane-session-test")
