"""The OpenAPI document states what the API answers: every error status an operation can give with the
error body, the constraints the models enforce, and a 405 that names every method the path allows."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from vmplane.api.app import create_app
from vmplane.settings import Settings


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    home = tmp_path_factory.mktemp("api-home")
    return TestClient(create_app(Settings(home=home), run_workflows=False))


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("put", "/provisioning-jobs", "GET, POST"),
        ("put", "/provisioning-jobs/job-x", "DELETE, GET, PATCH"),
        ("post", "/provisioning-jobs/job-x/drift", "GET"),
        ("post", "/tokens/tok-x", "DELETE"),
        ("delete", "/healthz", "GET"),
    ],
)
def test_a_405_names_every_method_of_the_path(client: TestClient, method: str, path: str, allow: str) -> None:
    r = client.request(method.upper(), path)
    assert r.status_code == 405
    assert r.headers["allow"] == allow
    assert r.json() == {"detail": {"message": "Method Not Allowed"}}


def test_every_operation_declares_its_error_answers_with_the_error_body(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    declared = {(p, m): set(op["responses"]) for p, ops in doc["paths"].items() for m, op in ops.items()}
    assert declared[("/provisioning-jobs", "post")] >= {"201", "400", "401", "403", "409", "422"}
    assert declared[("/provisioning-jobs/{job_id}", "patch")] >= {
        "200",
        "202",
        "401",
        "403",
        "404",
        "409",
        "412",
        "422",
    }
    assert declared[("/provisioning-jobs/{job_id}", "delete")] >= {"202", "401", "403", "404", "409", "412"}
    assert declared[("/provisioning-jobs/{job_id}/drift", "get")] >= {"200", "401", "403", "404", "409", "422", "502"}
    assert "502" in declared[("/provisioning-jobs/{job_id}", "patch")]  # a repair or an update reads the cloud
    assert declared[("/tokens/{token_id}", "delete")] >= {"204", "401", "403", "404"}
    for (path, method), codes in declared.items():
        for code in codes - {"200", "201", "202", "204"}:
            body = doc["paths"][path][method]["responses"][code]["content"]["application/json"]["schema"]
            assert body["$ref"].rsplit("/", 1)[-1] in {"ErrorBody", "HTTPValidationError"}, (path, method, code)


def test_the_document_states_what_the_spec_model_enforces(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    assert schemas["EnvSpec"]["properties"]["pools"]["propertyNames"] == {
        "pattern": "^[a-z]([a-z0-9-]{0,30}[a-z0-9])?$"
    }
    ports = schemas["Network"]["properties"]["ingressPorts"]["items"]
    assert ports["not"] == {"const": 22}
    gcp = schemas["GcpProvider"]["properties"]
    assert gcp["project"]["pattern"] and gcp["region"]["pattern"]


def test_an_unauthenticated_request_gets_the_declared_error_body(client: TestClient) -> None:
    r = client.get("/provisioning-jobs")
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert r.json() == {"detail": {"message": "a bearer token is required"}}


def test_the_drift_answer_and_the_repair_vmop_are_in_the_document(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    ok = doc["paths"]["/provisioning-jobs/{job_id}/drift"]["get"]["responses"]["200"]["content"]["application/json"]
    assert ok["schema"]["$ref"].endswith("/DriftReport")
    schemas = doc["components"]["schemas"]
    assert set(schemas["DriftReport"]["required"]) == {"env", "job", "target", "drift"}
    item = schemas["DriftedResource"]
    assert set(item["required"]) == {"resource", "kind", "id", "change", "fields", "repair", "repairable"}
    assert schemas["DriftChange"]["enum"] == ["missing", "changed", "extra"]
    assert schemas["Repair"]["properties"]["vmOp"]["const"] == "repair"
