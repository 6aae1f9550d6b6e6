"""ACM certificates for the HTTPS listener: requested with DNS validation (the validation record is
written into the hosted zone at once, so validation runs while the network, the ALB and the VMs are
built), or an existing ARN taken as is. Only certificates vmplane requested are deleted.

A provision requests it in stepCreateIAM, whose inputs (the spec, stepValidate's hosted zone) are
ready as soon as anything is created; stepCreateLoadBalancer (which starts after stepCreateIAM) calls
`request` again, which does nothing once `CertificateReady` is recorded and does the whole request when
the LB is attached later.
"""

from __future__ import annotations

import secrets
from functools import partial
from typing import TYPE_CHECKING

from vmplane.clouds.aws import dns
from vmplane.clouds.aws.errors import aws_call, aws_errors
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.aws.tags import TagList, owned_by, tag_list
from vmplane.clouds.base import Context, Tagger
from vmplane.clouds.deletes import delete
from vmplane.clouds.errors import InvalidRequestError
from vmplane.clouds.waits import poll

if TYPE_CHECKING:
    from types_boto3_acm.literals import CertificateStatusType

CERT_TIMEOUT = 1800.0  # DNS validation usually takes minutes; ACM gives up after 72 h
DELETE_TIMEOUT = 600.0
_ACTIVE_CERT: list[CertificateStatusType] = ["PENDING_VALIDATION", "ISSUED"]


def request(aws: AwsClients, ctx: Context) -> None:
    lb, infra, t = ctx.spec.load_balancer, ctx.infra, ctx.tagger
    assert lb is not None
    if aws_ids(infra).CertificateReady and aws_ids(infra).CertificateArn:
        return
    if lb.certificate_arn:
        aws_ids(infra).CertificateArn, aws_ids(infra).CertificateRequested = lb.certificate_arn, False
        aws_ids(infra).CertificateReady = True
        ctx.save()
        return
    arn = _find_job_certificate(aws, t, lb.domain)
    verb = "found" if arn else "requested"
    if arn is None:
        # One token per request, saved first: a retry after a crash returns the same certificate, while
        # a new request after a detach (whose certificate was deleted) gets a new one.
        if not aws_ids(infra).CertificateRequestToken:
            aws_ids(infra).CertificateRequestToken = secrets.token_hex(16)
        aws_ids(infra).CertificateRequested = True
        ctx.save()
        arn = aws_call(
            aws.acm.request_certificate,
            DomainName=lb.domain,
            ValidationMethod="DNS",
            IdempotencyToken=aws_ids(infra).CertificateRequestToken,
            Tags=tag_list(t.tags("certificate", lb.domain)),
        )["CertificateArn"]
    aws_ids(infra).CertificateArn, aws_ids(infra).CertificateRequested = arn, True
    ctx.save()
    if aws_ids(infra).HostedZoneID:
        _write_validation_record(aws, ctx, arn)
    aws_ids(infra).CertificateReady = True  # last: a crash before it redoes the (idempotent) request
    ctx.save()
    ctx.log(f"certificate {arn} {verb} for {lb.domain} (DNS validation)")


def _find_job_certificate(aws: AwsClients, t: Tagger, domain: str) -> str | None:
    found = job_certificates(aws, t, domain=domain, statuses=_ACTIVE_CERT)
    return found[0][0] if found else None


def _write_validation_record(aws: AwsClients, ctx: Context, arn: str) -> None:
    def record() -> dict[str, str] | None:
        cert = aws_call(aws.acm.describe_certificate, CertificateArn=arn)["Certificate"]
        options = cert.get("DomainValidationOptions", [])
        rr = options[0].get("ResourceRecord") if options else None
        if not rr:  # ACM fills the record in a few seconds after the request
            return None
        return {"Name": rr["Name"], "Type": rr["Type"], "Value": rr["Value"]}

    rr = poll(record, what="the certificate's DNS validation record", timeout=dns.DNS_TIMEOUT, first=0.05)
    zone = aws_ids(ctx.infra).HostedZoneID
    assert zone is not None
    dns.upsert(
        aws,
        ctx,
        zone,
        {"Name": rr["Name"], "Type": rr["Type"], "TTL": 300, "ResourceRecords": [{"Value": rr["Value"]}]},
        wait=False,  # ACM checks the record until it resolves; the listener waits for ISSUED itself
    )


def wait_issued(aws: AwsClients, arn: str) -> None:
    def issued() -> bool | None:
        status = aws_call(aws.acm.describe_certificate, CertificateArn=arn)["Certificate"]["Status"]
        if status in ("FAILED", "VALIDATION_TIMED_OUT", "REVOKED", "EXPIRED", "INACTIVE"):
            raise InvalidRequestError(f"certificate {arn} is {status}; check its DNS validation record")
        return True if status == "ISSUED" else None

    poll(issued, what=f"certificate {arn} to be issued (DNS validation)", timeout=CERT_TIMEOUT, first=0.1)


def delete_job_certificates(aws: AwsClients, ctx: Context) -> None:
    infra = ctx.infra
    arns = {a for a, _ in job_certificates(aws, ctx.tagger)}
    recorded = aws_ids(infra).CertificateArn
    if recorded and aws_ids(infra).CertificateRequested:
        arns.add(recorded)
    for arn in sorted(arns):
        # ACM says "in use" (ResourceInUseException) for a while after the listener that used it is gone.
        delete(
            partial(aws_call, aws.acm.delete_certificate, CertificateArn=arn),
            what=f"delete certificate {arn}",
            timeout=DELETE_TIMEOUT,
        )
    ids = aws_ids(infra)
    ids.CertificateArn, ids.CertificateRequested, ids.CertificateRequestToken, ids.CertificateReady = (
        None,
        False,
        None,
        False,
    )
    ctx.save()


def job_certificates(
    aws: AwsClients, t: Tagger, *, domain: str | None = None, statuses: list[CertificateStatusType] | None = None
) -> list[tuple[str, TagList]]:
    """The job's certificates (ARN, tags); domain and status narrow the scan before any tag lookup."""
    out: list[tuple[str, TagList]] = []
    with aws_errors():
        paginator = aws.acm.get_paginator("list_certificates")
        pages = paginator.paginate(CertificateStatuses=statuses) if statuses else paginator.paginate()
        for page in pages:
            for cert in page["CertificateSummaryList"]:
                if domain is not None and cert.get("DomainName") != domain:
                    continue
                tags = aws.acm.list_tags_for_certificate(CertificateArn=cert["CertificateArn"]).get("Tags", [])
                if owned_by(tags, t):
                    out.append((str(cert["CertificateArn"]), tags))
    return out
