"""ACM: a certificate in use by a load balancer cannot be deleted, and validation options must name the
certificate's own domains. (moto checks ACM's tag limits itself; its issuance is the extra in
sandbox/aws/extras.py, which keeps a certificate pending until its validation record exists.)"""

from __future__ import annotations

from functools import partial

from vmplane.sandbox.aws.rule import AwsFault, AwsRequest, Clients
from vmplane.sandbox.aws.rules._common import backend, fault, make_rule, p, request, subnet, vpc

_API = "https://docs.aws.amazon.com/acm/latest/APIReference/API_{}.html"


def _users(req: AwsRequest, arn: str) -> list[str]:
    """Listener ARNs that use the certificate (moto's ACM keeps no InUseBy: read ELB's listeners)."""
    used = []
    for lb in backend("elbv2", req).load_balancers.values():
        for listener in lb.listeners.values():
            if arn in [c if isinstance(c, str) else c.get("CertificateArn") for c in listener.certificates]:
                used.append(listener.arn)
    return used


def in_use_by(req: AwsRequest, arn: str) -> list[str]:
    return _users(req, arn)


def _delete_in_use(req: AwsRequest) -> AwsFault | None:
    arn = str(p(req, "CertificateArn", ""))
    if _users(req, arn):
        return fault("ResourceInUseException", f"Certificate {arn} in account {req.account} is in use.")
    return None


def _ex_delete_in_use(clients: Clients) -> AwsRequest:
    v = vpc(clients)
    a, b = subnet(clients, v, "10.0.1.0/24", "us-east-1a"), subnet(clients, v, "10.0.2.0/24", "us-east-1b")
    elb = clients("elbv2")
    lb = elb.create_load_balancer(Name="web", Subnets=[a, b])["LoadBalancers"][0]["LoadBalancerArn"]
    cert = clients("acm").request_certificate(DomainName="web.example.com", ValidationMethod="DNS")["CertificateArn"]
    backend("acm", request("acm", "x"))._certificates[cert].status = "ISSUED"
    elb.create_listener(
        LoadBalancerArn=lb, Protocol="HTTPS", Port=443, Certificates=[{"CertificateArn": cert}],
        DefaultActions=[{"Type": "fixed-response", "FixedResponseConfig": {"StatusCode": "404"}}],
    )  # fmt: skip
    return request("acm", "DeleteCertificate", CertificateArn=cert)


def _validation_domains(req: AwsRequest) -> AwsFault | None:
    names = {str(p(req, "DomainName", "")).lower(), *(str(n).lower() for n in p(req, "SubjectAlternativeNames") or ())}
    for option in p(req, "DomainValidationOptions") or ():
        if str(option.get("DomainName", "")).lower() not in names:
            return fault(
                "InvalidDomainValidationOptionsException",
                f"DomainValidationOption {option.get('DomainName')} is not a domain name of the certificate",
            )
    return None


def _ex_validation_domains(clients: Clients) -> AwsRequest:
    return request(
        "acm", "RequestCertificate", DomainName="web.example.com", ValidationMethod="EMAIL",
        DomainValidationOptions=[{"DomainName": "api.example.com", "ValidationDomain": "example.com"}],
    )  # fmt: skip


_rule = partial(make_rule, "acm")


RULES = (
    _rule("delete-in-use", "DeleteCertificate", "A certificate a load balancer listener uses cannot be deleted",
          _API.format("DeleteCertificate"), _delete_in_use, "ResourceInUseException", _ex_delete_in_use),
    _rule("validation-options-own-domains", "RequestCertificate",
          "DomainValidationOptions may only name the certificate's own domain names",
          _API.format("RequestCertificate"), _validation_domains, "InvalidDomainValidationOptionsException",
          _ex_validation_domains),
)  # fmt: skip
