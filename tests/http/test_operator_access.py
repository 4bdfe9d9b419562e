"""The operator endpoints (/v1/*): behind a bearer token when EXTENDER_OPERATOR_TOKEN is set, gone
with EXTENDER_OPERATOR_API=false; the verbs and health endpoints stay open either way."""

from __future__ import annotations

import pytest

from devstack import http_client
from tests.plugins.servers import StartServer

TOKEN = "s3cret-operator-token"
FILTER_ARGS = {"Pod": {"metadata": {"name": "p", "namespace": "default"}, "spec": {}}, "NodeNames": ["n1"]}
EXPLAIN_ARGS = {"Pod": {"metadata": {"name": "p"}, "spec": {}}}
OPERATOR_GETS = ("/v1/nodes", "/v1/nodes/n1", "/v1/gangs", "/v1/gangs/default/g", "/v1/cache/stats")


def test_the_operator_endpoints_need_the_token_and_health_does_not(start_server: StartServer) -> None:
    server = start_server(env={"EXTENDER_KUBE_MODE": "off", "EXTENDER_OPERATOR_TOKEN": TOKEN}, ready=True)
    with http_client.client(base_url=server.url, timeout=10) as http:
        for path in OPERATOR_GETS:
            refused = http.get(path)
            assert refused.status_code == 401, path
            assert refused.headers["www-authenticate"].startswith("Bearer")
            assert "EXTENDER_OPERATOR_TOKEN" in refused.json()["detail"]
            assert http.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401, path
            assert http.get(path, headers={"Authorization": f"Basic {TOKEN}"}).status_code == 401, path
        assert http.post("/v1/explain", json=EXPLAIN_ARGS).status_code == 401
        auth = {"Authorization": f"Bearer {TOKEN}"}
        assert http.get("/v1/nodes", headers=auth).status_code == 200
        assert http.get("/v1/gangs", headers=auth).status_code == 200
        assert http.get("/v1/cache/stats", headers=auth).status_code == 200
        assert http.post("/v1/explain", json=EXPLAIN_ARGS, headers=auth).status_code == 200
        assert http.get("/v1/nodes", headers={"authorization": f"bearer {TOKEN}"}).status_code == 200
        # Health and the verbs kube-scheduler calls carry no token.
        for path in ("/healthz", "/readyz", "/metrics"):
            assert http.get(path).status_code == 200, path
        assert http.post("/filter", json=FILTER_ARGS).status_code == 200


@pytest.mark.parametrize("token", [None, TOKEN])
def test_the_operator_endpoints_can_be_turned_off(start_server: StartServer, token: str | None) -> None:
    env = {"EXTENDER_KUBE_MODE": "off", "EXTENDER_OPERATOR_API": "false"}
    if token:
        env["EXTENDER_OPERATOR_TOKEN"] = token
    server = start_server(env=env, ready=True)
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    with http_client.client(base_url=server.url, timeout=10, headers=auth) as http:
        for path in OPERATOR_GETS:
            assert http.get(path).status_code == 404, path
        assert http.post("/v1/explain", json=EXPLAIN_ARGS).status_code == 404
        assert not [p for p in http.get("/openapi.json").json()["paths"] if p.startswith("/v1/")]
        assert http.post("/filter", json=FILTER_ARGS).status_code == 200
        assert http.get("/readyz").status_code == 200
