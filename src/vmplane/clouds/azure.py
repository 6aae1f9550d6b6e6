"""Azure: VMSS provisioning is in preview, so every job returns a clean `Invalid` answer.

Teardown has nothing to remove (nothing was ever created), so every delete succeeds and a destroy
of an Azure environment ends `deleted`.
"""

from __future__ import annotations

from typing import Any

from vmplane.clouds.base import Capabilities, CloudDriver, CommandResult, Context, Leftover, PlannedResource, TagRules
from vmplane.clouds.drift import Drift
from vmplane.clouds.errors import ProviderInvalidError, UnsupportedError
from vmplane.clouds.interfaces import ExecChannel, Identity, Inventory, LoadBalancer, Network, Pools
from vmplane.clouds.records import SessionHint
from vmplane.clouds.tags import AWS_TAG_KEY
from vmplane.envspec.models import CertSource, Cloud, EnvSpec, ExecMode
from vmplane.state import InfraConfig

INVALID_MESSAGE = (
    "Invalid: Azure VM provisioning (VMSS) and the Azure Run Command exec channel are in preview and not "
    "yet generally available in vmplane; they will be enabled at Azure GA. Use provider.cloud 'aws' today."
)


def _invalid() -> ProviderInvalidError:
    return ProviderInvalidError(INVALID_MESSAGE, code="Invalid")


def _unsupported(what: str) -> UnsupportedError:
    return UnsupportedError(f"{what}: not supported by the azure driver", code="Unsupported")


# Every part: what creates answers `Invalid`, what deletes has nothing to remove.
class _Network(Network):
    def ensure(self, ctx: Context) -> None:
        raise _invalid()

    def delete_firewall(self, ctx: Context) -> None:
        return None

    def delete(self, ctx: Context) -> None:
        return None


class _Identity(Identity):
    def ensure(self, ctx: Context) -> None:
        raise _invalid()

    def delete(self, ctx: Context) -> None:
        return None


class _Pools(Pools):
    def ensure_templates(self, ctx: Context) -> None:
        raise _invalid()

    def ensure_vms(self, ctx: Context) -> None:
        raise _invalid()

    def delete_vms(self, ctx: Context) -> None:
        return None

    def delete_templates(self, ctx: Context) -> None:
        return None

    def rotate(self, ctx: Context, pool_name: str) -> list[str]:
        raise _unsupported("rotating VMs")

    def stop(self, ctx: Context, pool_name: str) -> None:
        raise _unsupported("stopping a pool")

    def start(self, ctx: Context, pool_name: str) -> None:
        raise _unsupported("starting a pool")


class _LoadBalancer(LoadBalancer):
    def ensure_frontend(self, ctx: Context) -> None:
        raise _invalid()

    def ensure_backend(self, ctx: Context) -> None:
        raise _invalid()

    def ensure_listener(self, ctx: Context) -> None:
        raise _invalid()

    def ensure_dns_record(self, ctx: Context) -> None:
        raise _invalid()

    def detach(self, ctx: Context, *, keep_vms: bool) -> None:
        return None  # nothing was created

    def resources(self, spec: EnvSpec) -> list[PlannedResource]:
        return []

    def teardown_resources(self, infra: InfraConfig) -> list[PlannedResource]:
        return []


class _Exec(ExecChannel):
    def run(
        self, instance_ids: list[str], commands: list[str], timeout: float, comment: str = "vmplane exec"
    ) -> list[CommandResult]:
        raise _invalid()

    def session_hint(self, vm_id: str) -> SessionHint:
        raise _unsupported("interactive sessions")


class _Inventory(Inventory):
    def leftovers(self, ctx: Context) -> list[Leftover]:
        return []

    def retag(self, ctx: Context) -> None:
        raise _invalid()

    def drift(self, ctx: Context) -> list[Drift]:
        raise _unsupported("drift detection")

    def repair_drift(self, ctx: Context) -> None:
        raise _unsupported("drift repair")


class AzureDriver(CloudDriver):
    """Answers every provisioning call with `Invalid`; plans and teardown are empty."""

    cloud = Cloud.azure
    # What the Azure driver will offer at GA (so a spec is checked against it), though nothing runs yet.
    capabilities = Capabilities(
        pool_modes=frozenset({"fixed", "asg"}),
        load_balancers=True,
        cert_sources=frozenset({CertSource.AzureKeyVault}),
        instance_refresh=False,
        exec_modes=frozenset({ExecMode.AzureRunCmd}),
        exec_payload_bytes=4096,  # Run Command's script limit
        user_data_bytes=65536,
        tags=TagRules(style="key_value", key_pattern=AWS_TAG_KEY, max_key=512, max_value=256),
    )

    def __init__(self) -> None:
        self.network = _Network()
        self.identity = _Identity()
        self.pools = _Pools()
        self.lb = _LoadBalancer()
        self.exec_channel = _Exec()
        self.scheduler = None  # capabilities.schedules is False
        self.inventory = _Inventory()

    def validate(self, spec: EnvSpec) -> list[str]:
        raise _invalid()  # before any capability question: nothing runs on Azure yet

    def preflight(self, ctx: Context) -> None:
        raise _invalid()

    def provision_resources(self, spec: EnvSpec, infra: InfraConfig) -> list[PlannedResource]:
        return []

    def teardown_resources(self, infra: InfraConfig) -> list[PlannedResource]:
        return []

    def outputs(self, spec: EnvSpec, infra: InfraConfig) -> dict[str, Any]:
        return {}
