"""The Binding POST's direct lane (aiohttp's pool without httpx's request objects) with every form
of credentials a kubeconfig gives, against the fake API server: each bind authenticated as httpx
would, a rotated credential renewed through httpx, and the httpx transport left alone."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from extenders.kube import direct_post
from extenders.kube.client import BindStatus, KubeClient
from tests.fake_kube.builders import make_pod
from tests.plugins.fake_kube import FakeKube, FakeKubeTLS, MakeKube, StartFakeKube

pytestmark = pytest.mark.integration


def with_user(user: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    def edit(config: dict[str, Any]) -> None:
        config["users"][0]["user"] = user

    return edit


def exec_plugin(directory: Path, token_file: Path) -> dict[str, Any]:
    """A kubeconfig ``exec`` user whose plugin answers with the token in ``token_file``."""
    plugin = directory / "token-plugin.py"
    plugin.write_text(
        "import json, pathlib, sys\n"
        f"token = pathlib.Path({str(token_file)!r}).read_text().strip()\n"
        "json.dump({'apiVersion': 'client.authentication.k8s.io/v1beta1', 'kind': 'ExecCredential',"
        " 'status': {'token': token}}, sys.stdout)\n"
    )
    command = {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": sys.executable, "args": [str(plugin)]}
    return {"exec": command}


async def bind_new_pod(server: FakeKube, kube: KubeClient, namespace: str, name: str) -> BindStatus:
    pod = server.client.create(make_pod(name, namespace=namespace))
    result = await kube.bind_pod(namespace, name, pod["metadata"]["uid"], "n1")
    assert server.client.get("Pod", name, namespace)["spec"].get("nodeName") == ("n1" if result.ok else None)
    return result.status


CREDENTIALS = ("url-and-token", "kubeconfig-token", "token-file", "exec-plugin")


@pytest.mark.parametrize("credentials", CREDENTIALS)
async def test_bindings_take_the_direct_lane_with_each_form_of_token(
    fake_kube: FakeKube, kube_clients: MakeKube, tmp_path: Path, credentials: str
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(fake_kube.token + "\n")
    if credentials == "url-and-token":
        kube = kube_clients(url=fake_kube.url, token=fake_kube.token)
    else:
        user = {
            "kubeconfig-token": {"token": fake_kube.token},
            "token-file": {"tokenFile": str(token_file)},
            "exec-plugin": exec_plugin(tmp_path, token_file),
        }[credentials]
        kube = kube_clients(kubeconfig=fake_kube.edited_kubeconfig(tmp_path / "kubeconfig", with_user(user)))
    assert kube.direct is not None

    statuses = [await bind_new_pod(fake_kube, kube, "lane", f"p{i}") for i in range(3)]

    assert statuses == [BindStatus.BOUND] * 3
    # An auth flow's first request goes through httpx: the lane sends what the flow produced.
    assert kube.direct.posted == (3 if credentials == "url-and-token" else 2)
    assert fake_kube.requests("bind", "pods") == 3, "one request per bind: none was refused"


@pytest.mark.parametrize("credentials", ["token-file", "exec-plugin"])
async def test_a_rotated_token_is_renewed_through_httpx_and_then_sent_directly(
    fake_kube: FakeKube, kube_clients: MakeKube, tmp_path: Path, credentials: str
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(fake_kube.token)
    user = {"tokenFile": str(token_file)} if credentials == "token-file" else exec_plugin(tmp_path, token_file)
    kube = kube_clients(kubeconfig=fake_kube.edited_kubeconfig(tmp_path / "kubeconfig", with_user(user)))
    assert kube.direct is not None
    assert [await bind_new_pod(fake_kube, kube, "rotate", f"before{i}") for i in range(2)] == [BindStatus.BOUND] * 2
    assert kube.direct.posted == 1

    token_file.write_text("rotated-token")
    fake_kube.client.rotate_token("rotated-token")

    assert await bind_new_pod(fake_kube, kube, "rotate", "renewed") is BindStatus.BOUND
    assert kube.direct.posted == 1, "refused with 401, the lane handed the bind to httpx"
    assert await bind_new_pod(fake_kube, kube, "rotate", "after") is BindStatus.BOUND
    assert kube.direct.posted == 2, "the renewed token is sent directly"


async def test_a_bad_static_token_is_refused_as_through_httpx(fake_kube: FakeKube, kube_clients: MakeKube) -> None:
    kube = kube_clients(url=fake_kube.url, token="wrong")
    assert kube.direct is not None
    pod = fake_kube.client.create(make_pod("refused", namespace="bad"))

    result = await kube.bind_pod("bad", "refused", pod["metadata"]["uid"], "n1")

    assert result.status is BindStatus.ERROR and "401" in result.message, result
    assert kube.direct.posted == 1


async def test_client_certificate_credentials_take_the_lane(
    fake_kube_factory: StartFakeKube, kube_clients: MakeKube, tmp_path: Path
) -> None:
    server = fake_kube_factory(token="", tls=FakeKubeTLS.create(tmp_path, client_auth=True))
    kube = kube_clients(kubeconfig=str(server.kubeconfig_path))
    assert kube.direct is not None

    assert [await bind_new_pod(server, kube, "certs", f"p{i}") for i in range(2)] == [BindStatus.BOUND] * 2
    assert kube.direct.posted == 2


async def test_a_name_cannot_reach_another_path_through_the_lane(fake_kube: FakeKube, kube_clients: MakeKube) -> None:
    """The lane sends the path as encoded: a pod name of dots and slashes stays one path segment."""
    kube = kube_clients(url=fake_kube.url, token=fake_kube.token)
    fake_kube.client.create(make_pod("target", namespace="paths"))

    for name in ("..", "../target", "target/../../../nodes"):
        result = await kube.bind_pod("paths", name, "uid", "n1")
        assert result.status is BindStatus.NOT_FOUND, (name, result)
    assert fake_kube.client.get("Pod", "target", "paths")["spec"].get("nodeName") is None
    assert kube.direct is not None and kube.direct.posted == 3


async def test_the_httpx_transport_has_no_lane(fake_kube: FakeKube, kube_clients: MakeKube) -> None:
    kube = kube_clients(transport="httpx", url=fake_kube.url, token=fake_kube.token)
    assert kube.direct is None
    assert await bind_new_pod(fake_kube, kube, "plain", "p") is BindStatus.BOUND


async def test_without_httpx_s_transport_lookup_there_is_no_lane(
    fake_kube: FakeKube, kube_clients: MakeKube, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The lane finds its transport through a method httpx does not make public; a release that renames
    # it leaves the binds to httpx rather than failing the client's construction.
    assert callable(getattr(httpx.AsyncClient, direct_post.TRANSPORT_LOOKUP, None)), "httpx renamed it"
    monkeypatch.setattr(direct_post, "TRANSPORT_LOOKUP", "_renamed_by_a_later_httpx")
    kube = kube_clients(url=fake_kube.url, token=fake_kube.token)
    assert kube.direct is None
    assert await bind_new_pod(fake_kube, kube, "plain", "p") is BindStatus.BOUND
