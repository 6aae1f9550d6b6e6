"""schemathesis against the API's own /openapi.json, in process: every operation with generated
requests (valid and invalid), checking that nothing answers 5xx, that every status, header and body is
the one the document declares, that invalid requests are refused and that valid ones are accepted.

One exception, stated in the POST operation's description: a spec can be schema-valid and still be
refused (422, naming the fields) when its fields contradict each other (a pool's min above its
desired, an existing VPC without its subnets, per-cloud rules), which JSON Schema cannot express."""

from __future__ import annotations

import tempfile
from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from vmplane.api.app import JOBS, create_app
from vmplane.jobs import tokens
from vmplane.settings import Settings
from vmplane.store.db import transaction

# Built at import: schemathesis parametrizes from the schema at collection time.
_CFG = Settings(home=Path(tempfile.mkdtemp(prefix="vmplane-fuzz-")))
APP = create_app(_CFG, run_workflows=False)  # jobs are enqueued, never run
with transaction(_CFG.db_url) as _s:
    TOKEN, _ = tokens.create_token(_s, "acme", tokens.Role.admin)
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


@schema.parametrize()
@settings(derandomize=True, max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_api_answers_as_its_document_says(case: schemathesis.Case) -> None:
    if case.query and str(case.query.get("sandbox")).lower() == "true":
        # It would start the embedded emulator per example; tests/integration/test_api.py covers it.
        case.query["sandbox"] = "false"
    excluded = [positive_data_acceptance] if (case.method, case.path) == ("POST", JOBS) else []
    case.call_and_validate(headers={"Authorization": f"Bearer {TOKEN}"}, excluded_checks=excluded)
