"""`vmplane prices refresh`: the exact requests sent to the AWS Price List API (botocore Stubber) and the
Cloud Billing Catalog (a mocked httplib2 transport), the tables read from answers in the APIs' own shape
(tests/fixtures/prices/), the cache written and then used by `vmplane cost` with its source and date, and
failures that name what failed and keep the old cache. No network: the APIs cannot be reached from here,
so what is proven is the request we send and how we read the answer, not that AWS or Google answer so today."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import boto3
import pytest
from botocore.stub import Stubber
from googleapiclient.http import HttpMockSequence
from tests.helpers import EXAMPLES
from typer.testing import CliRunner

from vmplane.clouds.aws import price_api as refresh_aws
from vmplane.clouds.gcp import price_api as refresh_gcp
from vmplane.cost.prices import AWS_US_EAST_1, GCP_US_CENTRAL1, cache_path, choose, table_for
from vmplane.cost.refresh import PriceRefreshError, refresh
from vmplane.envspec.models import Cloud

FIXTURES = Path(__file__).parent.parent / "fixtures" / "prices"
AWS_ANSWERS = json.loads((FIXTURES / "aws-us-east-1.json").read_text())["responses"]
GCP_PAGES = json.loads((FIXTURES / "gcp-skus.json").read_text())["pages"]
NOW = datetime(2026, 12, 3, 9, 30, tzinfo=UTC)
STAMP = "2026-12-03T09:30:00Z"
SECRET_KEY = "AIzaSy-not-a-real-key-0123456789"


def term(field: str, value: str) -> dict[str, str]:
    return {"Type": "TERM_MATCH", "Field": field, "Value": value}


def get_products(service: str, *filters: dict[str, str], token: str | None = None) -> dict[str, object]:
    params: dict[str, object] = {"ServiceCode": service, "Filters": list(filters), "FormatVersion": "aws_v1"}
    params["MaxResults"] = 100
    if token:
        params["NextToken"] = token
    return params


def ec2_instance(instance_type: str) -> dict[str, object]:
    return get_products(
        "AmazonEC2",
        term("instanceType", instance_type),
        term("regionCode", "us-east-1"),
        term("operatingSystem", "Linux"),
        term("tenancy", "Shared"),
        term("preInstalledSw", "NA"),
        term("capacitystatus", "Used"),
        term("licenseModel", "No License required"),
        term("marketoption", "OnDemand"),
    )


REGION = term("regionCode", "us-east-1")
NETWORK_REQUESTS = [
    ("ebs:gp3", get_products("AmazonEC2", REGION, term("productFamily", "Storage"), term("volumeApiName", "gp3"))),
    ("elb:application", get_products("AWSELB", REGION, term("productFamily", "Load Balancer-Application"))),
    ("ec2:nat-gateway", get_products("AmazonEC2", REGION, term("productFamily", "NAT Gateway"))),
    ("vpc:public-ipv4", get_products("AmazonVPC", REGION, term("group", "VPCPublicIPv4Address"))),
]


@pytest.fixture
def pricing() -> Iterator[tuple[object, Stubber]]:
    """A real boto3 `pricing` client whose requests a Stubber checks and answers (nothing is sent)."""
    session = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing")
    client = session.client("pricing", region_name="us-east-1")
    with Stubber(client) as stub:
        yield client, stub


def expect_aws_refresh(stub: Stubber, instance_types: list[str], *, skip: str | None = None) -> None:
    """Queue the answers for a refresh of `instance_types`, each behind the exact request it answers."""
    for instance_type in instance_types:
        (answer,) = AWS_ANSWERS.get(f"ec2:{instance_type}", AWS_ANSWERS["ec2:x9.huge"])
        stub.add_response("get_products", answer, ec2_instance(instance_type))
    for key, params in NETWORK_REQUESTS:
        pages = [{"FormatVersion": "aws_v1", "PriceList": []}] if key == skip else AWS_ANSWERS[key]
        token = None
        for page in pages:
            stub.add_response("get_products", page, {**params, **({"NextToken": token} if token else {})})
            token = page.get("NextToken")


def aws_refresh(client: object, home: Path, extra: tuple[str, ...] = ()) -> object:
    return refresh(
        Cloud.aws, "us-east-1", extra_types=extra, home=home, now=NOW, fetch=partial(refresh_aws.fetch, client=client)
    )


def test_aws_refresh_sends_these_requests_and_reads_this_table(pricing, tmp_path) -> None:
    client, stub = pricing
    types = sorted([*AWS_US_EAST_1.instance_hour, "x9.huge"])  # the pinned types, and the file's
    expect_aws_refresh(stub, types)
    seen: list[str] = []
    done = refresh(
        Cloud.aws,
        "us-east-1",
        extra_types=["x9.huge"],
        home=tmp_path,
        now=NOW,
        progress=seen.append,
        fetch=partial(refresh_aws.fetch, client=client),
    )
    stub.assert_no_pending_responses()  # every request above was sent, in this order, with these filters
    table = done.table
    assert table.instance_hour == AWS_US_EAST_1.instance_hour  # the fixture carries the published prices
    rows = ("disk_gb_month", "lb_hour", "lb_capacity_unit_hour", "nat_hour", "nat_gb", "public_ip_hour")
    assert {r: getattr(table, r) for r in rows} == {r: getattr(AWS_US_EAST_1, r) for r in rows}
    assert (table.source, table.recorded, table.disk_kind) == ("AWS Price List API", STAMP, "gp3")
    # The ALB hour is LoadBalancerUsage, not the trust store's TS-LoadBalancerUsage in the same family;
    # the address is the in-use rate from the second page, not the idle or contiguous-block one.
    assert "sku" in table.evidence["lb_hour"] and " LoadBalancerUsage:" in table.evidence["lb_hour"]
    assert "USE1-PublicIPv4:InUseAddress" in table.evidence["public_ip_hour"]
    assert list(done.missing) == ["x9.huge"] and "BoxUsage:x9.huge" in done.missing["x9.huge"]
    assert "x9.huge" not in table.instance_hour  # named, never written as 0
    assert any("EC2 t3.small in us-east-1: 1 product" in m for m in seen)
    cached = json.loads(cache_path(Cloud.aws, "us-east-1", home=tmp_path).read_text())
    assert cached["source"] == "AWS Price List API" and cached["recorded"] == STAMP
    assert cached["instanceHour"]["t3.small"] == 0.0208 and cached["natGb"] == 0.045


def test_a_usagetype_is_matched_exactly_and_two_prices_for_one_row_are_ambiguous() -> None:
    row = refresh_aws.Row("lb_hour", "LoadBalancerUsage", "Hrs")
    (answer,) = AWS_ANSWERS["elb:application"]
    products = [json.loads(p) for p in answer["PriceList"]]
    price, _ = refresh_aws.pick(products, row)
    assert price == 0.0225
    regional = json.loads(json.dumps(products[0]).replace('"LoadBalancerUsage"', '"USE1-LoadBalancerUsage"'))
    dearer = json.loads(json.dumps(regional).replace("0.0225000000", "0.0300000000"))
    assert refresh_aws.pick([regional], row)[0] == 0.0225  # a region's prefix is the same row
    assert refresh_aws.pick([products[0], dearer], row) == (
        "ambiguous: 2 LoadBalancerUsage products with different prices ([0.0225, 0.03])"
    )


def test_a_failed_refresh_names_what_failed_and_keeps_the_old_cache(pricing, tmp_path) -> None:
    client, stub = pricing
    types = sorted(AWS_US_EAST_1.instance_hour)
    expect_aws_refresh(stub, types)
    path = aws_refresh(client, tmp_path).path
    before = path.read_bytes()
    # 1. The API refuses (e.g. no pricing:GetProducts permission).
    stub.add_client_error(
        "get_products", "AccessDeniedException", "User is not authorized to perform pricing:GetProducts"
    )
    with pytest.raises(PriceRefreshError, match=r"AWS Price List API refused EC2 c6i\.large: AccessDeniedException"):
        aws_refresh(client, tmp_path)
    # 2. The API answers, but without a row the estimate needs: nothing is written.
    expect_aws_refresh(stub, types, skip="ec2:nat-gateway")
    with pytest.raises(PriceRefreshError, match=r"lacks rows the estimate needs \(nat_hour: .*NatGateway-Hours"):
        aws_refresh(client, tmp_path)
    assert path.read_bytes() == before


def gcp_mock(pages: dict[str, list[dict]]) -> HttpMockSequence:
    order = [refresh_gcp.COMPUTE_ENGINE, refresh_gcp.NETWORKING]  # the order the refresher reads them
    return HttpMockSequence([({"status": "200"}, json.dumps(page)) for parent in order for page in pages[parent]])


def test_gcp_refresh_sends_these_requests_and_reads_this_table(tmp_path) -> None:
    http = gcp_mock(GCP_PAGES)  # Compute Engine's two pages, then Networking's one
    fetch = partial(refresh_gcp.fetch, http=http, api_key=SECRET_KEY)
    done = refresh(Cloud.gcp, "us-central1", extra_types=["c4a-standard-4"], home=tmp_path, now=NOW, fetch=fetch)
    sent = [urlsplit(uri) for uri, method, _body, _headers in http.request_sequence]
    assert [(u.netloc, u.path) for u in sent] == [
        ("cloudbilling.googleapis.com", "/v1/services/6F81-5844-456A/skus"),
        ("cloudbilling.googleapis.com", "/v1/services/6F81-5844-456A/skus"),
        ("cloudbilling.googleapis.com", "/v1/services/E505-1604-58F8/skus"),
    ]
    queries = [parse_qs(u.query) for u in sent]
    assert all(q["currencyCode"] == ["USD"] and q["pageSize"] == ["5000"] and q["key"] == [SECRET_KEY] for q in queries)
    assert [q.get("pageToken") for q in queries] == [None, ["Q0U6cGFnZS0y"], None]
    core, ram, n2_core, n2_ram = 0.021811, 0.002923, 0.031611, 0.004237  # us-central1, from the fixture
    by_hand = {
        "e2-micro": 0.25 * core + 1 * ram,
        "e2-small": 0.5 * core + 2 * ram,
        "e2-medium": 1 * core + 4 * ram,
        "e2-standard-2": 2 * core + 8 * ram,
        "e2-standard-4": 4 * core + 16 * ram,
        "n2-standard-2": 2 * n2_core + 8 * n2_ram,
    }
    table = done.table
    assert table.instance_hour == pytest.approx(by_hand, abs=1e-6)
    assert table.instance_hour == pytest.approx(GCP_US_CENTRAL1.instance_hour, abs=5e-6)  # the pinned ones agree
    assert (table.disk_kind, table.disk_gb_month) == ("pd-balanced", 0.1)  # not the regional disk, nor pd-standard
    assert (table.lb_hour, table.nat_hour, table.nat_gb, table.public_ip_hour) == (0.025, 0.0014, 0.045, 0.005)
    assert "Forwarding Rule Minimum Global" in table.evidence["lb_hour"]  # not the "Additional" rule's rate
    assert "Cloud Nat Gateway Uptime" in table.evidence["nat_hour"]  # not Private NAT's
    assert list(done.missing) == ["c4a-standard-4"] and "predefined" in done.missing["c4a-standard-4"]
    assert table.source == "Cloud Billing Catalog API" and table.recorded == STAMP


def test_a_gcp_error_names_the_failure_never_the_key_and_keeps_the_old_cache(tmp_path) -> None:
    old = refresh(
        Cloud.gcp,
        "us-central1",
        home=tmp_path,
        now=NOW,
        fetch=partial(refresh_gcp.fetch, http=gcp_mock(GCP_PAGES), api_key=SECRET_KEY),
    )
    before = old.path.read_bytes()
    refused = {"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.", "status": "x"}}
    http = HttpMockSequence([({"status": "400"}, json.dumps(refused))])
    with pytest.raises(PriceRefreshError) as err:
        refresh(
            Cloud.gcp, "us-central1", home=tmp_path, fetch=partial(refresh_gcp.fetch, http=http, api_key=SECRET_KEY)
        )
    refusal = "API key not valid. Please pass a valid API key."
    assert str(err.value) == f"Cloud Billing Catalog API answered 400 for Compute Engine SKUs: {refusal}"
    assert err.value.__cause__ is None  # the HttpError (whose URI carries the key) is not chained for display
    assert SECRET_KEY in http.request_sequence[0][0] and SECRET_KEY not in repr(err.value)
    assert old.path.read_bytes() == before


@pytest.fixture
def home(tmp_path, monkeypatch) -> Iterator[Path]:
    """VMPLANE_HOME for in-process CLI runs (the settings are cached per process: cleared around the test)."""
    from vmplane.settings import get_settings

    monkeypatch.setenv("VMPLANE_HOME", str(tmp_path / "home"))
    get_settings.cache_clear()
    yield tmp_path / "home"
    get_settings.cache_clear()


def test_vmplane_cost_uses_the_cache_and_says_where_its_prices_come_from(pricing, home) -> None:
    from vmplane.cli.main import app

    client, stub = pricing
    expect_aws_refresh(stub, sorted(AWS_US_EAST_1.instance_hour))
    path = aws_refresh(client, home).path
    runner = CliRunner()
    result = runner.invoke(app, ["cost", "-f", str(EXAMPLES / "fixed.jsonc"), "-o", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    prices = doc["assumptions"]["prices"]
    assert (prices["source"], prices["recorded"]) == ("AWS Price List API", STAMP)
    assert any(str(path) in note for note in prices["notes"])
    text = runner.invoke(app, ["cost", "-f", str(EXAMPLES / "fixed.jsonc")]).stdout
    assert "AWS Price List API" in text and STAMP in text
    # The cache's numbers are the ones used: change one and the estimate follows.
    cached = json.loads(path.read_text())
    cached["instanceHour"]["t3.small"] = 0.03
    path.write_text(json.dumps(cached))
    doc = json.loads(runner.invoke(app, ["cost", "-f", str(EXAMPLES / "fixed.jsonc"), "-o", "json"]).stdout)
    (vms,) = [line for line in doc["lines"] if line["kind"] == "instance"]
    assert (vms["unitPrice"], vms["monthly"]) == (0.03, round(2 * 0.03 * 730, 2))
    shown = json.loads(runner.invoke(app, ["prices", "show", "--cloud", "aws", "-o", "json"]).stdout)
    ((used,),) = [[t for t in shown["tables"] if t["region"] == "us-east-1"]]
    assert used["used"] == "cache" and used["table"]["source"] == "AWS Price List API"


def test_an_unusable_cache_falls_back_to_the_pinned_table_and_says_why(tmp_path) -> None:
    path = cache_path(Cloud.gcp, "us-central1", home=tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text('{"format": 1, "currency": "USD", "instanceHour": {"e2-small": "cheap"}}')
    choice = choose(Cloud.gcp, "us-central1", home=tmp_path)
    assert choice.origin == "pinned" and choice.table == GCP_US_CENTRAL1
    assert choice.cache_problem is not None and "instanceHour must map types to prices" in choice.cache_problem
    assert table_for(Cloud.aws, "eu-north-1", home=tmp_path) is None  # no cache, no pinned table: none


def test_refresh_without_credentials_exits_1_names_it_and_keeps_the_cache(home, monkeypatch) -> None:
    from vmplane.cli.main import app

    for var in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(var, raising=False)
    for var in (
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(home / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(home / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance-metadata lookup: nothing leaves the host
    path = cache_path(Cloud.aws, "us-east-1", home=home)
    path.parent.mkdir(parents=True)
    path.write_text("an old cache, unreadable on purpose: it must survive byte for byte")
    result = CliRunner().invoke(app, ["prices", "refresh", "--cloud", "aws", "-o", "json"])
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["complete"] is False and doc["refreshed"] == []
    ((failed,),) = [doc["failed"]]
    assert (failed["cloud"], failed["region"]) == ("aws", "us-east-1")
    assert failed["error"].startswith("AWS Price List API: no AWS credentials")
    assert path.read_text() == "an old cache, unreadable on purpose: it must survive byte for byte"


def test_the_cost_path_imports_no_cloud_sdk(tmp_path) -> None:
    code = (
        "import sys\n"
        "from vmplane.cost.estimate import estimate\n"
        "from vmplane.cost.prices import table_for\n"
        "import vmplane.cli.prices\n"
        "from vmplane.envspec.models import Cloud\n"
        "table_for(Cloud.aws, 'us-east-1')\n"
        "heavy = ('boto3', 'botocore', 'googleapiclient', 'google.auth', 'pydantic_settings')\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
    )
    env = {"VMPLANE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == ""


@pytest.mark.parametrize("env", [{}, {"VMPLANE_HOME": "/srv/vmplane"}, {"vmplane_home": "/srv/lower"}])
def test_the_cache_lives_under_the_settings_home(env, monkeypatch, tmp_path) -> None:
    from vmplane.cost.prices import default_home
    from vmplane.settings import Settings

    for key in [k for k in os.environ if k.upper() == "VMPLANE_HOME"]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(tmp_path))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert default_home() == Settings().home


def test_what_refresh_prices_for_a_file_and_the_usage_errors() -> None:
    from vmplane.cli.prices import _targets
    from vmplane.errors import UsageError

    example = EXAMPLES / "gcp-fixed.jsonc"
    assert _targets(None, None, example) == [(Cloud.gcp, "us-central1", ["e2-small"])]
    assert _targets(None, "us-east1", example) == [(Cloud.gcp, "us-east1", ["e2-small"])]
    assert _targets(None, None, None) == [(Cloud.aws, "us-east-1", []), (Cloud.gcp, "us-central1", [])]
    assert _targets("aws", "eu-west-1", None) == [(Cloud.aws, "eu-west-1", [])]
    for args, message in [
        (("aws", None, example), "--cloud aws but .*gcp-fixed.jsonc is for gcp"),
        ((None, "eu-west-1", None), "--region needs --cloud"),
        (("azure", None, None), "--cloud must be one of aws, gcp, not 'azure'"),
    ]:
        with pytest.raises(UsageError, match=message):
            _targets(*args)


def test_an_unknown_profile_is_one_line_naming_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """botocore's ProfileNotFound escaped as a 79-line traceback from `vmplane prices refresh`."""
    from vmplane.clouds.aws.price_api import make_client

    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_PROFILE", "nosuch")
    with pytest.raises(PriceRefreshError, match=r"AWS profile 'nosuch' \(AWS_PROFILE\) is not in"):
        make_client()
