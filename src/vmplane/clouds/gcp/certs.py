"""Google-managed certificates for the HTTPS proxy.

A managed certificate covers a fixed list of domains and cannot be edited: a new domain is a new
certificate (its name carries a digest of the domain), the proxy switches to it, and the old one is
deleted after. It turns ACTIVE only once the domain resolves to the load balancer's address, which
can take up to an hour on Google Cloud: the DNS step waits a bounded time and reports the state
honestly instead of failing the environment. The sandbox never resolves DNS, so there it only looks.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

from vmplane.clouds.base import Context
from vmplane.clouds.errors import InvalidRequestError
from vmplane.clouds.gcp import naming, operations
from vmplane.clouds.gcp.ids import gcp_ids
from vmplane.clouds.gcp.lb_refs import ensure
from vmplane.clouds.gcp.ownership import description, owned_by
from vmplane.clouds.gcp.session import CALL_TIMEOUT, GcpClients

CERT_DEADLINE = 20 * 60.0  # on Google Cloud; issuance itself may take up to ~60 min after DNS resolves
# The sandbox activates a certificate only when a test says so: one look (a wait cost every apply 0.5 s).
SANDBOX_CERT_DEADLINE = 0.0
POLL_CAP = 30.0
# Per-domain statuses that will not clear by waiting: DNS or CAA records must change first.
FAILED_DOMAIN = {"FAILED_NOT_VISIBLE", "FAILED_CAA_CHECKING", "FAILED_CAA_FORBIDDEN"}
FAILED_STATUS = {"PROVISIONING_FAILED_PERMANENTLY"}


def ensure_certificate(gcp: GcpClients, ctx: Context, domain: str) -> str:
    """The job's managed certificate for `domain` (found or created); returns its name."""
    from google.cloud import compute_v1

    name = naming.certificate(ctx.spec, domain)
    ids = gcp_ids(ctx.infra)
    if ids.Certificate != name:
        ids.Certificate, ids.CertificateStatus = name, None
        ctx.save()  # intent; an older certificate stays findable by name prefix (job_certificates)
    client = gcp.compute("SslCertificates")
    cert = compute_v1.SslCertificate(
        name=name,
        description=description(ctx.tagger, "certificate"),
        type_="MANAGED",
        managed=compute_v1.SslCertificateManagedSslCertificate(domains=[domain]),
    )

    def insert(request_id: str) -> object:
        req = compute_v1.InsertSslCertificateRequest(
            project=gcp.project, ssl_certificate_resource=cert, request_id=request_id
        )
        return client.insert_unary(request=req, timeout=CALL_TIMEOUT)

    found, created = ensure(gcp, ctx, "sslCertificates", name, get=_getter(gcp, name), insert=insert)
    if list(found.managed.domains) != [domain]:
        raise InvalidRequestError(f"certificate {name} covers {list(found.managed.domains)}, not {domain}")
    ctx.log(f"managed certificate {name} for {domain} {'requested' if created else 'found'}")
    return name


def _getter(gcp: GcpClients, name: str) -> Callable[[], Any]:
    client = gcp.compute("SslCertificates")
    return lambda: client.get(project=gcp.project, ssl_certificate=name, timeout=CALL_TIMEOUT)


def status(gcp: GcpClients, name: str, domain: str) -> str:
    """The certificate's managed status; raises for a status that waiting will not fix."""
    cert = gcp.call("compute.sslCertificates.get", _getter(gcp, name))
    overall = str(cert.managed.status or "PROVISIONING")
    per_domain = dict(cert.managed.domain_status)
    bad = {d: s for d, s in per_domain.items() if s in FAILED_DOMAIN}
    if bad or overall in FAILED_STATUS:
        detail = ", ".join(f"{d}: {s}" for d, s in sorted(bad.items())) or overall
        raise InvalidRequestError(
            f"loadBalancer.domain: the managed certificate for {domain} cannot be issued ({detail}); "
            f"check that {domain} resolves to the load balancer's address and that no CAA record forbids "
            "Google (pki.goog)"
        )
    return overall


def wait_active(
    gcp: GcpClients,
    ctx: Context,
    domain: str,
    *,
    deadline: float | None = None,
    sleep: Callable[[float], None] | None = None,
) -> str:
    """Poll until ACTIVE or the deadline; record and return the last status (never fails on PROVISIONING)."""
    ids = gcp_ids(ctx.infra)
    name = ids.Certificate
    if not name:
        raise InvalidRequestError("the certificate must exist before the DNS step checks it")
    sleep = sleep or time.sleep
    limit = deadline if deadline is not None else (SANDBOX_CERT_DEADLINE if gcp.target.sandbox else CERT_DEADLINE)
    end, delay = time.monotonic() + limit, 0.5
    while True:
        state = status(gcp, name, domain)
        if state == "ACTIVE" or time.monotonic() + delay > end:
            break
        sleep(delay)
        delay = min(delay * 2, POLL_CAP)
    ids.CertificateStatus = state
    ctx.save()
    return state


def job_certificates(gcp: GcpClients, ctx: Context) -> list[str]:
    """Names of this environment's certificates that carry this job's tags (any domain, any age)."""
    client = gcp.compute("SslCertificates")
    head = f"{ctx.spec.name}-cert-"
    # A project holds few certificates: one unfiltered list, matched here by name and tags.
    found = gcp.call(
        "compute.sslCertificates.list", lambda: list(client.list(project=gcp.project, timeout=CALL_TIMEOUT))
    )
    return sorted(c.name for c in found if c.name.startswith(head) and owned_by(c, ctx.tagger))


def delete_certificates(gcp: GcpClients, ctx: Context, names: list[str]) -> None:
    """Delete these certificates; "in use" (a proxy still lists one) is retried by the teardown rule."""
    client = gcp.compute("SslCertificates")
    for name in names:
        call = partial(client.delete_unary, project=gcp.project, ssl_certificate=name, timeout=CALL_TIMEOUT)
        operations.remove(gcp, "compute.sslCertificates.delete", call, what=f"delete certificate {name}")
