"""Azure: VMSS provisioning is in preview, so every job returns a clean `Invalid` answer.

Teardown has nothing to remove (nothing was ever created), so every delete succeeds and a destroy
of an Azure environment ends `deleted`.
"""

from __future__ import annotations

from typing import Any

from vmplane.clouds.base import Capabilities, CloudDriver, CommandResult, Context, Leftover, PlannedResource, TagRules
from vmplane.clouds.errors import ProviderInvalidError
from vmplane.clouds.tags import AWS_TAG_KEY
from vmplane.envspec.models import CertSource, Cloud, EnvSpec, ExecMode
from vmplane.state import InfraConfig

INVALID_MESSAGE = (
    "Invalid: Azure VM provisioning (VMSS) and the Azure Run Command exec channel are in preview and not "
    "yet generally available in vmplane; they will be enabled at Azure GA. Use provider.cloud 'aws' today."
)


def _invalid() -> ProviderInvalidError:
    return ProviderInvalidError(INVALID_MESSAGE, code="Invalid")


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

    def validate(self, spec: EnvSpec) -> list[str]:
        raise _invalid()  # before any capability question: nothing runs on Azure yet

    def preflight(self, ctx: Context) -> None:
        raise _invalid()

    def ensure_network(self, ctx: Context) -> None:
        raise _invalid()

    def ensure_identity(self, ctx: Context) -> None:
        raise _invalid()

    def ensure_launch_templates(self, ctx: Context) -> None:
        raise _invalid()

    def ensure_vms(self, ctx: Context) -> None:
        raise _invalid()

    def update_tags(self, ctx: Context) -> None:
        raise _invalid()

    def detach_load_balancer(self, ctx: Context, *, keep_vms: bool) -> None:
        return None  # nothing was created

    def delete_vms(self, ctx: Context) -> None:
        return None

    def delete_launch_templates(self, ctx: Context) -> None:
        return None

    def delete_security_group(self, ctx: Context) -> None:
        return None

    def delete_identity(self, ctx: Context) -> None:
        return None

    def delete_network(self, ctx: Context) -> None:
        return None

    def leftovers(self, ctx: Context) -> list[Leftover]:
        return []

    def run_command(
        self, instance_ids: list[str], commands: list[str], timeout: float, comment: str = "vmplane exec"
    ) -> list[CommandResult]:
        raise _invalid()

    def provision_resources(self, spec: EnvSpec, infra: InfraConfig) -> list[PlannedResource]:
        return []

    def lb_resources(self, spec: EnvSpec) -> list[PlannedResource]:
        return []

    def teardown_resources(self, infra: InfraConfig) -> list[PlannedResource]:
        return []

    def lb_teardown_resources(self, infra: InfraConfig) -> list[PlannedResource]:
        return []

    def outputs(self, spec: EnvSpec, infra: InfraConfig) -> dict[str, Any]:
        return {}
