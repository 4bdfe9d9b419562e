"""``KubeClient.preempt_pod``: the requests it makes, as kube-scheduler evicts its own victims."""

from __future__ import annotations

import httpx
import orjson
import pytest

from extenders.kube.client import KubeApiError, KubeClient


def _api(
    status_code: int, delete_code: int, seen: list[tuple[str, str, str, dict[str, object]]]
) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        body = orjson.loads(request.content) if request.content else {}
        seen.append((request.method, request.url.path, request.headers.get("content-type", ""), body))
        code = status_code if request.method == "PATCH" else delete_code
        return httpx.Response(code, json={"kind": "Status", "message": "m"} if code >= 400 else {})

    return httpx.MockTransport(handler)


async def test_a_disruption_condition_then_a_delete_both_on_the_pods_uid() -> None:
    seen: list[tuple[str, str, str, dict[str, object]]] = []
    async with httpx.AsyncClient(base_url="http://api", transport=_api(200, 200, seen)) as http:
        assert await KubeClient(http).preempt_pod("ns", "p-1", "u1", "why")
    (patch, delete) = seen
    assert patch[:3] == ("PATCH", "/api/v1/namespaces/ns/pods/p-1/status", "application/strategic-merge-patch+json")
    (condition,) = patch[3]["status"]["conditions"]  # type: ignore[index]
    assert (condition["type"], condition["status"], condition["reason"], condition["message"]) == (
        "DisruptionTarget",
        "True",
        "PreemptionByScheduler",
        "why",
    )
    assert patch[3]["metadata"] == {"uid": "u1"}
    assert delete[:2] == ("DELETE", "/api/v1/namespaces/ns/pods/p-1") and delete[3] == {"preconditions": {"uid": "u1"}}


@pytest.mark.parametrize(("patch_code", "delete_code"), [(404, 200), (409, 200), (200, 404), (200, 409)])
async def test_a_pod_gone_or_replaced_is_not_an_error(patch_code: int, delete_code: int) -> None:
    seen: list[tuple[str, str, str, dict[str, object]]] = []
    async with httpx.AsyncClient(base_url="http://api", transport=_api(patch_code, delete_code, seen)) as http:
        assert not await KubeClient(http).preempt_pod("ns", "p-1", "u1", "why")
    assert len(seen) == (1 if patch_code != 200 else 2)


async def test_other_answers_raise() -> None:
    async with httpx.AsyncClient(base_url="http://api", transport=_api(403, 200, [])) as http:
        with pytest.raises(KubeApiError):
            await KubeClient(http).preempt_pod("ns", "p-1", "u1", "why")
