"""Azure: VMSS provisioning is in preview, so every job returns the seed's clean `Invalid` stub."""

from __future__ import annotations

from vmplane.clouds.base import CommandResult, Context, Leftover
from vmplane.clouds.errors import ProviderInvalidError

INVALID_MESSAGE = (
    "Invalid: Azure VM provisioning (VMSS) and the Azure Run Command exec channel are in preview and not "
    "yet generally available in vmplane; they will be enabled at Azure GA. Use provider.cloud 'aws' today."
)


class AzureDriver:
    """Answers every provisioning call with `Invalid`; teardown has nothing to remove."""

    def preflight(self, ctx: Context) -> None:
        raise ProviderInvalidError(INVALID_MESSAGE, code="Invalid")

    def ensure_network(self, ctx: Context) -> None:
        raise ProviderInvalidError(INVALID_MESSAGE, code="Invalid")

    ensure_identity = ensure_launch_templates = ensure_vms = ensure_network

    def delete_vms(self, ctx: Context) -> None:
        return None

    delete_launch_templates = delete_security_group = delete_identity = delete_network = delete_vms

    def leftovers(self, ctx: Context) -> list[Leftover]:
        return []

    def run_command(
        self, instance_ids: list[str], commands: list[str], timeout: float, comment: str = "vmplane exec"
    ) -> list[CommandResult]:
        raise ProviderInvalidError(INVALID_MESSAGE, code="Invalid")
