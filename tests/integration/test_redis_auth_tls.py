"""A replica against a Redis that wants a password, an ACL user, TLS from a private CA, or all of them.

Each test starts its own ``redis-server`` on loopback (the installed one, built with TLS) and a real
replica (``python -m app``, standalone), then checks ``/readyz``, a ``/filter`` round trip and, from
the Redis side, that the pool, the pub/sub connection and the Lua scripts all got through: with
``requirepass``, ``default off`` or ``--port 0`` a connection that skipped the password or TLS
would be refused.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
import trustme

from app.serving.embedded_redis import die_with_parent, find_redis_server, free_port
from devstack import http_client
from tests.plugins.servers import ServerProcess
from tests.waiting import readiness_with_reason

pytestmark = pytest.mark.timeout(120)

PASSWORD = "s3cret-" + uuid.uuid4().hex[:12]
ALICE_PASSWORD = "alice-" + uuid.uuid4().hex[:12]
README = Path(__file__).resolve().parents[2] / "README.md"


@dataclass
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A private CA with a server certificate for 127.0.0.1 and a client certificate, and a second CA."""
    where = tmp_path_factory.mktemp("redis-pki")
    ca, other = trustme.CA(), trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("extender-client")
    pki = Pki(*(where / name for name in ("ca.pem", "server.pem", "server.key", "client.pem", "client.key", "o.pem")))
    ca.cert_pem.write_to_path(str(pki.ca))
    server.cert_chain_pems[0].write_to_path(str(pki.server_cert))
    server.private_key_pem.write_to_path(str(pki.server_key))
    client.cert_chain_pems[0].write_to_path(str(pki.client_cert))
    client.private_key_pem.write_to_path(str(pki.client_key))
    other.cert_pem.write_to_path(str(pki.other_ca))
    return pki


class RedisProcess:
    """``redis-server`` with extra arguments; ``admin_url`` is how the test itself talks to it."""

    def __init__(self, args: list[str], admin_url: str, port: int) -> None:
        self.port = port
        self.admin_url = admin_url.format(port=port)
        self._dir = tempfile.TemporaryDirectory(prefix="extender-redis-auth-")
        base = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", self._dir.name]
        self.proc = subprocess.Popen(
            [find_redis_server(), *base, "--loglevel", "warning", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,
        )
        deadline = time.monotonic() + 10
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                out = self.proc.stdout.read().decode(errors="replace") if self.proc.stdout else ""
                raise RuntimeError(f"redis-server {args} exited at start: {out}")
            try:
                with self.admin() as client:
                    client.ping()
                return
            except redis.RedisError as exc:
                last = exc
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"redis-server did not answer within 10s: {last}")

    def admin(self) -> redis.Redis:
        return redis.Redis.from_url(self.admin_url, decode_responses=True)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self._dir.cleanup()


@pytest.fixture
def start_redis() -> Iterator[Any]:
    started: list[RedisProcess] = []

    def _start(args: list[str], admin_url: str) -> RedisProcess:
        port = free_port()
        server = RedisProcess([a.format(port=port) for a in args], admin_url, port)
        started.append(server)
        return server

    yield _start
    for server in started:
        server.stop()


@pytest.fixture
def start_replica() -> Iterator[Any]:
    started: list[ServerProcess] = []

    def _start(redis_url: str) -> ServerProcess:
        env = {
            "EXTENDER_REDIS_URL": redis_url,
            "EXTENDER_REDIS_PREFIX": f"auth{uuid.uuid4().hex[:8]}",
            "EXTENDER_KUBE_MODE": "off",
        }
        replica = ServerProcess(env, f"auth{len(started) + 1}")
        started.append(replica)
        replica.wait_healthy()
        return replica

    yield _start
    for replica in started:
        replica.stop()


def node(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    }


def pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}}]},
    }


def full_log(replica: ServerProcess) -> str:
    return replica.log_path.read_text(errors="replace")


def assert_serves_through(replica: ServerProcess, server: RedisProcess, user: str) -> None:
    """Ready, a filter round trip, and the pool, the pub/sub connection and Lua all authenticated as ``user``."""
    replica.wait_ready()
    ready = replica.get("/readyz").json()
    assert ready["ready"] is True and ready["redis"] is True, ready
    name = f"n-{uuid.uuid4().hex[:6]}"
    answer = http_client.post(
        f"{replica.url}/filter", json={"Pod": pod("p1"), "Nodes": {"items": [node(name)]}}, timeout=10
    )
    assert answer.status_code == 200, answer.text
    assert [n["metadata"]["name"] for n in answer.json()["Nodes"]["items"]] == [name], answer.text
    # The node the filter stored is what the next call by name reads back (through Redis).
    by_name = http_client.post(f"{replica.url}/filter", json={"Pod": pod("p2"), "NodeNames": [name]}, timeout=10)
    assert by_name.status_code == 200 and by_name.json()["NodeNames"] == [name], by_name.text
    with server.admin() as admin:
        deadline = time.monotonic() + 10
        while True:
            me = admin.client_id()
            clients = [c for c in admin.client_list() if int(c["id"]) != me]
            subscribers = [c for c in clients if int(c["sub"]) > 0]
            stats = admin.info("commandstats").get("cmdstat_evalsha", {})
            scripts_ran = stats.get("calls", 0) - stats.get("failed_calls", 0)
            if subscribers and scripts_ran > 0:
                break
            assert time.monotonic() < deadline, f"no pub/sub or Lua through Redis: {clients} {stats}"
            time.sleep(0.1)
    assert {c["user"] for c in clients} == {user}, clients
    text = full_log(replica) + str(ready)
    assert PASSWORD not in text and ALICE_PASSWORD not in text


REQUIREPASS = ["--port", "{port}", "--requirepass", PASSWORD]
ACL_ONLY = ["--port", "{port}", "--user", "default", "off", "--user", "alice", "on", f">{ALICE_PASSWORD}"]
ACL_ONLY += ["~*", "&*", "+@all"]


@pytest.mark.parametrize(
    ("args", "url", "user"),
    [
        (REQUIREPASS, f"redis://:{PASSWORD}@127.0.0.1:{{port}}/0", "default"),
        (ACL_ONLY, f"redis://alice:{ALICE_PASSWORD}@127.0.0.1:{{port}}/0", "alice"),
    ],
    ids=["requirepass", "acl-user"],
)
def test_password_in_the_url_reaches_every_connection(
    start_redis: Any, start_replica: Any, args: list[str], url: str, user: str
) -> None:
    server = start_redis(args, url)
    with server.admin() as admin:  # the server really refuses a connection without the password
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(host="127.0.0.1", port=server.port).ping()
        admin.ping()
    replica = start_replica(url.format(port=server.port))
    assert_serves_through(replica, server, user)


@pytest.mark.parametrize(
    ("args", "url"),
    [
        (REQUIREPASS, "redis://:wrong-password-x@127.0.0.1:{port}/0"),
        (ACL_ONLY, "redis://alice:wrong-password-x@127.0.0.1:{port}/0"),
        (REQUIREPASS, "redis://127.0.0.1:{port}/0"),
    ],
    ids=["wrong-password", "wrong-acl-password", "no-password"],
)
def test_wrong_password_is_not_ready_and_names_the_redis(
    start_redis: Any, start_replica: Any, args: list[str], url: str
) -> None:
    right = f"redis://:{PASSWORD}@127.0.0.1:{{port}}/0" if args is REQUIREPASS else None
    server = start_redis(args, right or f"redis://alice:{ALICE_PASSWORD}@127.0.0.1:{{port}}/0")
    replica = start_replica(url.format(port=server.port))
    body = readiness_with_reason(replica, 10)
    answer = replica.get("/readyz")
    body = answer.json()
    assert answer.status_code == 503 and body["ready"] is False and body["redis"] is False, body
    masked = url.format(port=server.port).replace("wrong-password-x", "***")
    assert body["redis_url"] == masked, body
    assert body["reason"].startswith(f"Redis {masked} refused the credentials in EXTENDER_REDIS_URL: "), body
    assert "AuthenticationError" in body["reason"], body
    assert "wrong-password-x" not in answer.text
    time.sleep(1.0)  # the background loops retried meanwhile: the process is still up, and says nothing secret
    assert replica.proc.poll() is None and replica.get("/healthz").status_code == 200
    assert "wrong-password-x" not in full_log(replica) and PASSWORD not in full_log(replica)
    assert "Traceback" not in full_log(replica), full_log(replica)


def tls_args(pki: Pki, clients: str) -> list[str]:
    return [
        "--port", "0", "--tls-port", "{port}", "--tls-auth-clients", clients,
        "--tls-cert-file", str(pki.server_cert), "--tls-key-file", str(pki.server_key),
        "--tls-ca-cert-file", str(pki.ca), "--requirepass", PASSWORD,
    ]  # fmt: skip


def test_rediss_with_a_private_ca(start_redis: Any, start_replica: Any, pki: Pki) -> None:
    url = f"rediss://:{PASSWORD}@127.0.0.1:{{port}}/0?ssl_ca_certs={pki.ca}"
    server = start_redis(tls_args(pki, "no"), url)
    with pytest.raises(redis.ConnectionError):  # no plain-text port at all
        redis.Redis(host="127.0.0.1", port=server.port, password=PASSWORD, socket_timeout=2).ping()
    replica = start_replica(url.format(port=server.port))
    assert_serves_through(replica, server, "default")
    assert replica.get("/readyz").json()["redis_url"] == url.format(port=server.port).replace(PASSWORD, "***")


def test_rediss_with_a_client_certificate(start_redis: Any, start_replica: Any, pki: Pki) -> None:
    query = f"ssl_ca_certs={pki.ca}&ssl_certfile={pki.client_cert}&ssl_keyfile={pki.client_key}"
    url = f"rediss://:{PASSWORD}@127.0.0.1:{{port}}/0?{query}"
    server = start_redis(tls_args(pki, "yes"), url)
    without = f"rediss://:{PASSWORD}@127.0.0.1:{server.port}/0?ssl_ca_certs={pki.ca}"
    with pytest.raises(redis.ConnectionError):  # the server really asks for a client certificate
        redis.Redis.from_url(without, socket_timeout=2).ping()
    replica = start_replica(url.format(port=server.port))
    assert_serves_through(replica, server, "default")


@pytest.mark.parametrize("trust", ["other-ca", "system"])
def test_rediss_checks_the_server_certificate(start_redis: Any, start_replica: Any, pki: Pki, trust: str) -> None:
    server = start_redis(tls_args(pki, "no"), f"rediss://:{PASSWORD}@127.0.0.1:{{port}}/0?ssl_ca_certs={pki.ca}")
    query = f"?ssl_ca_certs={pki.other_ca}" if trust == "other-ca" else ""
    url = f"rediss://:{PASSWORD}@127.0.0.1:{server.port}/0{query}"
    replica = start_replica(url)
    body = readiness_with_reason(replica, 10)
    assert body["ready"] is False and body["redis"] is False, body
    assert body["reason"].startswith(f"Redis {url.replace(PASSWORD, '***')} failed: "), body
    assert "CERTIFICATE_VERIFY_FAILED" in body["reason"] or "certificate verify failed" in body["reason"], body
    assert PASSWORD not in str(body) and PASSWORD not in full_log(replica)


def test_readme_documents_the_redis_url_forms() -> None:
    text = README.read_text()
    for form in (
        "redis://:PASSWORD@",
        "redis://USER:PASSWORD@",
        "rediss://",
        "ssl_ca_certs=",
        "ssl_certfile=",
        "ssl_keyfile=",
        "refused the credentials in EXTENDER_REDIS_URL",
    ):
        assert form in text, f"README.md does not show {form!r}"


def test_the_key_password_in_the_query_is_masked_too() -> None:
    from app.redaction import redacted_url

    url = "rediss://u:pw@h:6380/0?ssl_keyfile=/k.pem&ssl_password=kpw&ssl_ca_certs=/ca.pem"
    assert redacted_url(url) == "rediss://u:***@h:6380/0?ssl_keyfile=/k.pem&ssl_password=***&ssl_ca_certs=/ca.pem"
