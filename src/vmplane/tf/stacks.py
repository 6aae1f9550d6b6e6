"""One generated stack per cloud, behind one interface: `tf generate` never asks which cloud it is."""

from __future__ import annotations

from typing import Protocol

from vmplane.envspec.models import Cloud, EnvSpec
from vmplane.tf.hcl import Block, Item
from vmplane.tf.inputs import AWS_NOTES, InputNotes


class CloudStack(Protocol):
    @property
    def notes(self) -> InputNotes:
        """The inputs files' header comments, in this stack's terms."""
        ...

    def unsupported(self, spec: EnvSpec) -> str | None:
        """Why this spec cannot be generated (naming the field), or None."""
        ...

    def structure(self, spec: EnvSpec) -> dict[str, list[Item]]:
        """The files that hold resources (main, roles, outputs): they change with the spec's shape only."""
        ...

    def terraform_settings(self) -> Block:
        """The `terraform` block: required Terraform and provider versions (what `deps tf` mirrors)."""
        ...

    def backend(self, spec: EnvSpec) -> list[Item]: ...

    def sandbox_override(self, spec: EnvSpec, endpoint: str) -> list[Item]: ...


class AwsStack:
    notes = AWS_NOTES

    def unsupported(self, spec: EnvSpec) -> str | None:
        if spec.network.existing_vpc_id:
            return "network.existingVpcId: the generated stack creates its own VPC; adopt one by hand"
        return None

    def structure(self, spec: EnvSpec) -> dict[str, list[Item]]:
        from vmplane.tf.aws import iam, main, outputs

        return {"main.tf": main.main_tf(spec), "roles.tf": iam.roles_tf(spec), "outputs.tf": outputs.outputs_tf(spec)}

    def terraform_settings(self) -> Block:
        from vmplane.tf.aws import main

        return main.terraform_settings()

    def backend(self, spec: EnvSpec) -> list[Item]:
        from vmplane.tf.aws import backend

        return backend.backend(spec)

    def sandbox_override(self, spec: EnvSpec, endpoint: str) -> list[Item]:
        from vmplane.tf.aws import backend

        return backend.sandbox_override(spec, endpoint)


class GcpStack:
    @property
    def notes(self) -> InputNotes:
        from vmplane.tf.gcp import common

        return common.NOTES

    def unsupported(self, spec: EnvSpec) -> str | None:
        from vmplane.tf.gcp import common

        return common.unsupported(spec)

    def structure(self, spec: EnvSpec) -> dict[str, list[Item]]:
        from vmplane.tf.gcp import iam, main, outputs

        return {"main.tf": main.main_tf(spec), "roles.tf": iam.roles_tf(spec), "outputs.tf": outputs.outputs_tf(spec)}

    def terraform_settings(self) -> Block:
        from vmplane.tf.gcp import main

        return main.terraform_settings()

    def backend(self, spec: EnvSpec) -> list[Item]:
        from vmplane.tf.gcp import backend

        return backend.backend(spec)

    def sandbox_override(self, spec: EnvSpec, endpoint: str) -> list[Item]:
        from vmplane.tf.gcp import backend

        return backend.sandbox_override(spec, endpoint)


def _stacks() -> dict[Cloud, CloudStack]:
    # Each cloud's stack, as its descriptor names it (this module's classes above are defined by now).
    from vmplane.clouds.registry import descriptors

    return {d.cloud: d.tf_stack.load()() for d in descriptors() if d.tf_stack is not None}


STACKS: dict[Cloud, CloudStack] = _stacks()
