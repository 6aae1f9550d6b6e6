"""AWS shapes of vmplane's tag set."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from vmplane.clouds.aws.errors import aws_call
from vmplane.clouds.base import Tagger


def tag_list(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in sorted(tags.items())]


def tag_spec(resource_type: str, tags: dict[str, str]) -> list[dict[str, Any]]:
    return [{"ResourceType": resource_type, "Tags": tag_list(tags)}]


def job_filters(tagger: Tagger, role: str | None = None, name: str | None = None) -> list[dict[str, Any]]:
    """EC2 Filters matching resources of this job (and role/name): how find-by-tag works."""
    f: list[dict[str, Any]] = [{"Name": f"tag:{tagger.job_key}", "Values": [tagger.job_id]}]
    if role:
        f.append({"Name": f"tag:{tagger.role_key}", "Values": [role]})
    if name:
        f.append({"Name": "tag:Name", "Values": [name]})
    return f


def matches_tag_filters(item: Mapping[str, Any], filters: list[dict[str, Any]]) -> bool:
    """Re-check `tag:` filters on a described item. Some endpoints (the sandbox's DescribeNatGateways)
    ignore them server-side; trusting that would mix up two environments' resources."""
    tags = {t["Key"]: t["Value"] for t in item.get("Tags", [])}
    return all(tags.get(f["Name"].removeprefix("tag:")) in f["Values"] for f in filters if f["Name"].startswith("tag:"))


def find_tagged(
    describe: Callable[..., Mapping[str, Any]], key: str, filters: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Find-by-tag: describe with `filters`, then re-check the tag filters on what came back."""
    items: list[dict[str, Any]] = aws_call(describe, Filters=filters).get(key, [])
    return [i for i in items if matches_tag_filters(i, filters)]


# Read-only shapes, so that every service's own tag TypedDicts (the stubs') fit.
TagList = Sequence[Mapping[str, Any]]  # AWS's `[{Key, Value}]`
TagSet = TagList | Mapping[str, str]


def tag_owner(tags: TagSet, tagger: Tagger) -> str | None:
    """The job id in a tag set (the AWS `[{Key, Value}]` list or a plain dict), or None if untagged."""
    as_dict = tags if isinstance(tags, Mapping) else {t["Key"]: t.get("Value", "") for t in tags}
    return as_dict.get(tagger.job_key)


def owned_by(tags: TagSet, tagger: Tagger) -> bool:
    """Whether a resource with these tags belongs to the tagger's job."""
    return tag_owner(tags, tagger) == tagger.job_id
