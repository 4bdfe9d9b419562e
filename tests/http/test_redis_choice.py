"""Which Redis a replica uses: the embedded one only without a Kubernetes API (unless asked for),
and /readyz naming the one in use."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from devstack import http_client
from devstack.replica import ServerProcess
from tests.http.test_command_line import run_app
from tests.plugins.fake_kube import FakeKube
from tests.plugins.servers import StartServer


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No EXTENDER_* setting inherited, and no kubeconfig found unless a test writes one (KUBECONFIG
    points at a path that does not exist yet); the path is returned."""
    for name in list(os.environ):
        if name.startswith("EXTENDER_") or name in ("KUBERNETES_SERVICE_HOST", "REDIS_URL"):
            monkeypatch.delenv(name)
    kubeconfig = tmp_path / "kubeconfig"
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    return kubeconfig


@pytest.fixture
def servers(server_processes: list[ServerProcess]) -> list[ServerProcess]:
    return server_processes


def _refusal(**env: str) -> str:
    done = run_app(**env)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    line = lines[0]
    assert line.startswith("error: EXTENDER_REDIS_URL is not set and a Kubernetes API is configured")
    assert "EXTENDER_EMBEDDED_REDIS=true" in line
    return line


def test_the_embedded_redis_is_refused_when_a_kubernetes_api_is_configured(clean_env: Path) -> None:
    assert "(EXTENDER_KUBE_MODE=on)" in _refusal(EXTENDER_KUBE_MODE="on")
    assert "(EXTENDER_KUBE_URL is set)" in _refusal(EXTENDER_KUBE_URL="https://127.0.0.1:6443")
    clean_env.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    assert f"found the kubeconfig {clean_env}" in _refusal()  # auto mode, the default
    clean_env.write_text("{not a kubeconfig")  # broken, but a cluster was meant all the same
    _refusal(EXTENDER_KUBE_MODE="auto")


def test_without_a_kubernetes_api_the_embedded_redis_starts_and_readyz_says_so(
    clean_env: Path, servers: list[ServerProcess]
) -> None:
    """The README's first command: no setting at all."""
    server = ServerProcess({}, "bare")
    servers.append(server)
    server.wait_healthy()
    ready = http_client.get(f"{server.url}/readyz", timeout=5)
    body = ready.json()
    assert ready.status_code == 503 and body["mode"] == "no-cluster"  # auto mode and no cluster found
    assert body["redis"] is True and body["redis_embedded"] is True
    assert body["redis_url"].startswith("redis://127.0.0.1:")


def test_the_embedded_redis_can_be_asked_for_beside_a_kubernetes_api(
    clean_env: Path, servers: list[ServerProcess], fake_kube: FakeKube
) -> None:
    env = {
        "EXTENDER_EMBEDDED_REDIS": "true",
        "EXTENDER_KUBE_MODE": "on",
        "EXTENDER_KUBE_URL": fake_kube.url,
        "EXTENDER_KUBE_TOKEN": fake_kube.token,
    }
    server = ServerProcess(env, "asked")
    servers.append(server)
    server.wait_ready()
    body = http_client.get(f"{server.url}/readyz", timeout=5).json()
    assert body["kube"] is True and body["redis_embedded"] is True
    assert body["redis_url"].startswith("redis://127.0.0.1:")


def test_readyz_names_the_shared_redis(start_server: StartServer, redis_url: str) -> None:
    server = start_server(env={"EXTENDER_KUBE_MODE": "off"}, ready=True)
    body = http_client.get(f"{server.url}/readyz", timeout=5).json()
    assert body["redis_url"] == redis_url and body["redis_embedded"] is False


def test_readyz_never_shows_the_redis_password(start_server: StartServer, redis_url: str) -> None:
    """A password in the URL is masked (this Redis has none: redis-py's AUTH is let through)."""
    with_password = redis_url.replace("redis://", "redis://:hunter2@", 1)
    server = start_server(env={"EXTENDER_KUBE_MODE": "off", "EXTENDER_REDIS_URL": with_password}, ready=True)
    answer = http_client.get(f"{server.url}/readyz", timeout=5)
    assert "hunter2" not in answer.text
    assert answer.json()["redis_url"] == redis_url.replace("redis://", "redis://:***@", 1)


def test_the_redis_url_is_redacted_wherever_the_password_is() -> None:
    from app.redaction import redacted_url

    assert redacted_url("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"
    assert redacted_url("rediss://user:p%40ss@redis.example:6380/1") == "rediss://user:***@redis.example:6380/1"
    assert redacted_url("redis://:pw@h:1/0?socket_timeout=3") == "redis://:***@h:1/0?socket_timeout=3"
    assert redacted_url("unix:///run/redis.sock?db=0&password=pw") == "unix:///run/redis.sock?db=0&password=***"
    assert redacted_url(None) is None
