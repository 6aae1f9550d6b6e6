"""Everything still tagged with a job id: what `destroy` must leave none of."""

from __future__ import annotations

from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.resources import EC2_KINDS, TABLE
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.aws.tags import TagList, tag_list
from vmplane.clouds.base import Context, Leftover


def job_ec2_resources(aws: AwsClients, ctx: Context) -> list[tuple[str, str, TagList]]:
    """Every EC2 resource tagged with the job: (kind, id, tags), from the table's EC2 kinds side by side."""
    return [(o.kind, o.id, tag_list(dict(o.tags))) for o in TABLE.observe(aws, ctx, EC2_KINDS)]


def leftovers(aws: AwsClients, ctx: Context) -> list[Leftover]:
    """What `destroy` must leave none of: everything the resource table observes as the job's (one lookup
    per kind, side by side)."""
    aws_ids(ctx.infra)  # the record's AWS part exists before the lookups read it side by side
    return TABLE.leftovers(aws, ctx)
