"""The one list of clouds: each cloud's descriptor (clouds/<cloud>/descriptor.py), and what the rest of
vmplane asks of a cloud through it. Descriptors import nothing heavy, so this module is on the CLI's
start-up path; drivers are imported only when built (boto3 alone costs ~0.3 s, the Google clients about
as much). `register` adds a cloud from outside this list (a plugin, the tests' toy cloud); the configured
plugins (`clouds/plugins.py`) are loaded by the first look-up."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Protocol

from vmplane.clouds.aws.descriptor import DESCRIPTOR as AWS
from vmplane.clouds.azure_descriptor import DESCRIPTOR as AZURE
from vmplane.clouds.descriptor import Descriptor
from vmplane.clouds.gcp.descriptor import DESCRIPTOR as GCP
from vmplane.clouds.plugins import load_plugins
from vmplane.clouds.proxmox.descriptor import DESCRIPTOR as PROXMOX
from vmplane.envspec.base import Cloud

if TYPE_CHECKING:
    from vmplane.clouds.base import CloudDriver
    from vmplane.envspec.models import EnvSpec
    from vmplane.settings import Settings
    from vmplane.target import Target

# Keyed by the cloud's name so a registered cloud need not be a member of the Cloud enum's file.
_DESCRIPTORS: dict[str, Descriptor] = {d.name: d for d in (AWS, GCP, AZURE, PROXMOX)}


def register(descriptor: Descriptor) -> None:
    """Add (or replace) a cloud; the driver cache is cleared so a replaced cloud's targets get the new driver."""
    _DESCRIPTORS[descriptor.name] = descriptor
    driver_for.cache_clear()


def unregister(name: str) -> None:
    """Remove a cloud `register` added (tests put the list back as they found it)."""
    _DESCRIPTORS.pop(name, None)
    driver_for.cache_clear()


def descriptors() -> list[Descriptor]:
    load_plugins(strict=False)  # listed while the CLI imports: a failed plugin is raised by the look-ups
    return list(_DESCRIPTORS.values())


def descriptor_for(cloud: Cloud | str) -> Descriptor:
    load_plugins()
    name = cloud.value if isinstance(cloud, Cloud) else cloud
    found = _DESCRIPTORS.get(name)
    if found is None:
        from vmplane.clouds.errors import UnsupportedError

        known = ", ".join(sorted(_DESCRIPTORS))
        raise UnsupportedError(f"provider.cloud {name!r} is not a known cloud ({known})", code="NotImplemented")
    return found


class _Factories(Mapping[Cloud, "Callable[[Target], CloudDriver]"]):
    """Each cloud's driver factory, read through the descriptors (so a registered cloud is in it too)."""

    def __getitem__(self, cloud: Cloud) -> Callable[[Target], CloudDriver]:
        load_plugins()
        return _DESCRIPTORS[cloud.value].driver

    def __iter__(self) -> Iterator[Cloud]:
        return iter([d.cloud for d in descriptors()])

    def __len__(self) -> int:
        return len(descriptors())


FACTORIES = _Factories()


def static_problems(spec: EnvSpec) -> list[str]:
    """What `spec` asks that its cloud's driver cannot do (the capability check), each naming the field,
    with no target, credentials, network or cloud SDK import (`vmplane validate`). The driver's own
    `validate` (plan, apply, stepValidate) checks the same and, on Google Cloud, the image references."""
    return descriptor_for(spec.provider.cloud).static_problems(spec)


@lru_cache(maxsize=16)
def driver_for(target: Target) -> CloudDriver:
    """One driver per target and process: a boto3 session and its clients cost ~0.1-0.3 s to build."""
    return descriptor_for(target.cloud).driver(target)


class _RunningSandbox(Protocol):
    """What sandbox/control.py's SandboxInfo answers (the sandbox is a layer above the clouds)."""

    @property
    def endpoint(self) -> str: ...

    def endpoint_for(self, cloud: Cloud) -> str: ...


def sandbox_endpoint(cloud: Cloud | None, info: _RunningSandbox) -> str:
    """The running sandbox's endpoint for `cloud`: its own for a cloud the sandbox emulates, otherwise (and
    as before the GCP sandbox) the AWS one, where the cloud's driver answers with its own refusal."""
    if cloud is not None and descriptor_for(cloud).sandbox_port is not None:
        return info.endpoint_for(cloud)
    return info.endpoint


def sandbox_address(cloud: Cloud | None, settings: Settings) -> str:
    """The sandbox's address for `cloud`'s API without starting it (planning and generating only write it
    down): the AWS port for a cloud it does not emulate, as `sandbox_endpoint`."""
    port_of = descriptor_for(cloud).sandbox_port if cloud is not None else None
    port = port_of(settings) if port_of is not None else settings.sandbox_port
    return f"http://127.0.0.1:{port}"
