"""`CloudSpec`: what the file's models need to know of one cloud, declared by the cloud's own package.

The envspec models name no cloud: the provider shapes, the defaults filled before validation, the id
patterns, the per-cloud options (`pools.<p>.<cloud>`, `exec.<cloud>`, `loadBalancer.<cloud>`), the
checks and the starter text all come from the registered specs (`vmplane.clouds.specs`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from pydantic_core import InitErrorDetails, PydanticCustomError

from vmplane.envspec.base import CertSource, ExecMode, SpecModel
from vmplane.envspec.secrets import SecretStore

if TYPE_CHECKING:
    from vmplane.envspec.models import EnvSpec

Check = Callable[["EnvSpec"], list[InitErrorDetails]]
Loc = tuple[str | int, ...]
OptionsT = TypeVar("OptionsT", bound="CloudOptions")


class ProviderBase(SpecModel):
    """What every provider shape answers, so code written against any cloud type-checks on all of them.

    Each cloud's member narrows `cloud` to its own name (a Literal) and adds its own fields."""

    cloud: Any  # each member's own Literal

    if TYPE_CHECKING:  # each member answers these, as a field or a property

        @property
        def region(self) -> str: ...

        @property
        def profile(self) -> str | None: ...

    def target_fields(self, sandbox: bool) -> dict[str, Any]:
        """The `Target` fields (beyond cloud and region) a job of this provider records."""
        return {}


class CloudOptions(SpecModel):
    """A cloud's own settings inside a neutral section, under the cloud's key (`pools.web.proxmox`)."""

    CLOUD: ClassVar[str] = ""


@dataclass(frozen=True)
class IdPattern:
    """An id format for existingVpcId / existingPrivateSubnetIds entries, and how a message names it."""

    pattern: str
    what: str


@dataclass(frozen=True)
class Moved:
    """A setting that moved under the cloud's key: `section` is `pool`, `exec` or `loadBalancer`."""

    section: str
    key: str  # the old key, beside the neutral fields; the same key under `<section>.<cloud>`


@dataclass(frozen=True)
class Starter:
    """`vmplane init`'s commented text for the cloud (the neutral template is envspec/starter.py)."""

    provider: str  # the provider members; __REGION__ and __PROJECT__ are substituted
    network: str  # the network section's comment
    machine: str  # the pool's machine lines
    secrets: tuple[str, str]  # an example reference for an env variable and for a file
    default_region: str = ""
    sandbox_hint: str = ""
    # The starter's arguments checked: a message for a bad region or project, else None.
    check: Callable[[str, str], str | None] = field(default=lambda region, project: None)


def plain_pool_defaults(defaults: Mapping[str, Any]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A pool filler that adds `defaults` (camelCase keys) the pool leaves out."""

    def fill(pool: dict[str, Any]) -> dict[str, Any]:
        return {**{k: v for k, v in defaults.items() if not has(pool, k)}, **pool}

    return fill


@dataclass(frozen=True)
class CloudSpec:
    name: str  # provider.cloud's value
    label: str  # for people: "Google Cloud"
    provider: type[ProviderBase]
    exec_mode: ExecMode
    secret_stores: tuple[SecretStore, ...]  # the stores a VM reads with its own identity; () plain values only
    network_id: IdPattern
    subnet_id: IdPattern | None  # None: VMs attach to the network itself
    fill_pool: Callable[[dict[str, Any]], dict[str, Any]]  # a raw pool with the cloud's defaults
    cert_source: CertSource | None = None  # None: no managed load balancer
    pool_options: type[CloudOptions] | None = None
    exec_options: type[CloudOptions] | None = None
    lb_options: type[CloudOptions] | None = None
    moved: tuple[Moved, ...] = ()  # old locations still read (with a warning)
    checks: tuple[Check, ...] = ()  # the cloud's limits and rules, run on the validated spec
    starter: Starter | None = None


def spec_error(loc: Loc, value: Any, message: str, kind: str = "cloud_mismatch") -> InitErrorDetails:
    """An error at `loc` for the checks that run after validation."""
    # `{...}` in a custom error's message is a template slot: the literal text must not hold braces.
    text = message.replace("{", "(").replace("}", ")")
    return InitErrorDetails(type=PydanticCustomError(kind, text), loc=loc, input=value)


def missing(loc: Loc, parent: Any) -> InitErrorDetails:
    return InitErrorDetails(type="missing", loc=loc, input=parent)


def has(d: Mapping[str, Any], alias: str) -> bool:
    """Whether a raw section gives `alias` (camelCase) or its snake_case name."""
    return alias in d or snake(alias) in d


def snake(alias: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in alias)


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class OptionSection(SpecModel):
    """A neutral section (a pool, exec, the load balancer) that holds each cloud's options under its key.

    The keys are fields built from the registered specs (envspec/models.py); read them through these."""

    def options(self, kind: type[OptionsT]) -> OptionsT | None:
        value = self.cloud_options(kind.CLOUD)
        return value if isinstance(value, kind) else None

    def cloud_options(self, cloud: str) -> CloudOptions | None:
        value = self.__dict__.get(cloud) if cloud in type(self).model_fields else None
        return value if isinstance(value, CloudOptions) else None

    def given_options(self) -> dict[str, CloudOptions]:
        """Every cloud's options this section sets, by cloud."""
        return {k: v for k, v in self.__dict__.items() if isinstance(v, CloudOptions)}
