"""The Binding request KubeClient sends, and what it says when no answer comes back."""

from __future__ import annotations

import httpx
import pytest

from extenders.kube.client import BindStatus, KubeClient


def _recording(paths: list[str]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.raw_path.decode())
        return httpx.Response(201, json={"kind": "Status", "status": "Success"})

    return httpx.MockTransport(handler)


@pytest.mark.parametrize(
    ("namespace", "name"),
    [("default", "../../kube-system/pods/victim"), ("default/pods/x", "y"), ("default", ".."), (".", "web")],
)
async def test_names_from_a_request_stay_inside_their_path_segment(namespace: str, name: str) -> None:
    """Bind arguments come from the HTTP request: a "/" or a dot segment must not address another object."""
    paths: list[str] = []
    async with httpx.AsyncClient(base_url="http://api", transport=_recording(paths)) as http:
        result = await KubeClient(http).bind_pod(namespace, name, "uid-1", "n1")
    assert result.status is BindStatus.BOUND
    (path,) = paths
    segments = path.split("/")
    assert segments[:4] == ["", "api", "v1", "namespaces"] and segments[5] == "pods" and segments[7:] == ["binding"]
    assert len(segments) == 8, path


@pytest.mark.parametrize(
    ("error", "uncertain"),
    [
        (httpx.ConnectError("refused"), False),
        (httpx.ConnectTimeout("slow connect"), False),
        (httpx.ReadTimeout("no answer"), True),
        (httpx.RemoteProtocolError("dropped"), True),
        (httpx.ReadError("reset"), True),
    ],
)
async def test_a_bind_without_an_answer_is_an_uncertain_error(error: httpx.HTTPError, uncertain: bool) -> None:
    """Only a failure while connecting proves the Binding was never sent; after that the API server may
    still create it, and the binder must know (it keeps the reservation then)."""

    def handler(request: httpx.Request) -> httpx.Response:
        raise error

    async with httpx.AsyncClient(base_url="http://api", transport=httpx.MockTransport(handler)) as http:
        result = await KubeClient(http).bind_pod("default", "web", "uid-1", "n1")
    assert result.status is BindStatus.ERROR and not result.ok
    assert result.uncertain is uncertain
