"""The test and benchmark helpers' API calls that must outlast a slow API server."""

from __future__ import annotations

import httpx
import pytest

from devstack import http_client
from devstack.kube import Kube, KubeError


def _kube(answers: list[int], seen: list[str]) -> Kube:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.path}")
        status = answers.pop(0)
        return httpx.Response(status, json={"kind": "Status", "code": status})

    return Kube(http_client.client(base_url="http://api.invalid", transport=httpx.MockTransport(handle)))


def test_a_pod_collection_delete_cut_short_by_the_servers_timeout_goes_again_until_done() -> None:
    seen: list[str] = []
    _kube([504, 504, 200], seen).delete_namespace_pods("ns")
    assert seen == ["DELETE /api/v1/namespaces/ns/pods"] * 3


def test_a_pod_collection_delete_that_never_ends_fails_after_its_attempts() -> None:
    seen: list[str] = []
    with pytest.raises(KubeError, match="504"):
        _kube([504] * 3, seen).delete_namespace_pods("ns", attempts=3)
    assert len(seen) == 3


def test_other_failures_are_not_retried() -> None:
    seen: list[str] = []
    with pytest.raises(KubeError, match="403"):
        _kube([403, 200], seen).delete_namespace_pods("ns")
    assert len(seen) == 1
