"""Real Redis topologies for tests: a primary with a replica, and the same under three Sentinels.

Every process is a real ``redis-server`` on a free loopback port (Sentinels are ``redis-server
--sentinel``), stopped at the end of the test and killed by the kernel if the test run dies.
"""

from __future__ import annotations

import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from app.serving.embedded_redis import die_with_parent, find_redis_server, free_port, stop_process

MASTER_NAME = "extender-primary"
DOWN_AFTER_MS = 500  # a primary silent this long is down for a Sentinel
FAILOVER_TIMEOUT_MS = 3000


@dataclass(frozen=True)
class TlsFiles:
    cert: Path
    key: Path
    ca: Path


class RedisNode:
    """One ``redis-server`` process; ``sentinel_conf`` makes it a Sentinel with that configuration,
    ``username`` and ``password`` are what this side's ``client()`` authenticates with, and ``tls`` makes
    the port TLS only (replication and a Sentinel's connections too), the server certificate signed by ``tls.ca``."""

    def __init__(
        self,
        name: str,
        args: list[str] | None = None,
        sentinel_conf: str | None = None,
        password: str | None = None,
        tls: TlsFiles | None = None,
        port: int | None = None,
        username: str | None = None,
    ) -> None:
        self.name = name
        self.password = password
        self.username = username
        self.tls = tls
        self.port = port or free_port()
        self._dir = tempfile.TemporaryDirectory(prefix=f"extender-{name}-")
        self.log_path = Path(self._dir.name) / "redis.log"
        common = ["--port", str(self.port), "--bind", "127.0.0.1", "--dir", self._dir.name]
        common += ["--logfile", str(self.log_path), "--save", ""]
        if tls is not None:
            common += ["--port", "0", "--tls-port", str(self.port), "--tls-cert-file", str(tls.cert)]
            common += ["--tls-key-file", str(tls.key), "--tls-ca-cert-file", str(tls.ca)]
            common += ["--tls-auth-clients", "no", "--tls-replication", "yes"]
        if sentinel_conf is not None:
            conf = Path(self._dir.name) / "sentinel.conf"
            conf.write_text(sentinel_conf)  # Sentinel rewrites its file, so each has its own
            command = [find_redis_server(), str(conf), "--sentinel", *common]
        else:
            command = [find_redis_server(), *common, "--appendonly", "no", "--repl-diskless-sync-delay", "0"]
        self.proc = subprocess.Popen(
            [*command, *(args or [])],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
        )

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        tls: dict[str, Any] = {"ssl": True, "ssl_ca_certs": str(self.tls.ca)} if self.tls else {}
        return redis.Redis(
            host="127.0.0.1",
            port=self.port,
            username=self.username,
            password=self.password,
            decode_responses=True,
            socket_timeout=5,
            **tls,
        )

    def wait_up(self, timeout: float = 10.0) -> RedisNode:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with self.client() as client:
                    client.ping()
                return self
            except redis.RedisError:
                time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not answer within {timeout}s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:] if self.log_path.exists() else ""

    def signal(self, sig: signal.Signals) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL: no shutdown, no last write to anyone."""
        self.signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        self.signal(signal.SIGCONT)  # a SIGSTOPped one must run to handle SIGTERM
        stop_process(self.proc)
        self._dir.cleanup()


StartNode = Callable[..., RedisNode]


@pytest.fixture
def start_redis_node() -> Iterator[StartNode]:
    """Factory: ``start_redis_node(...)`` takes ``RedisNode``'s arguments; the node is started but not
    waited for."""
    started: list[RedisNode] = []

    def _start(*args: Any, **kwargs: Any) -> RedisNode:
        node = RedisNode(*args, **kwargs)
        started.append(node)
        return node

    yield _start
    for node in started:
        node.stop()


def replication_offsets(primary: RedisNode, replica: RedisNode) -> tuple[int, int, str]:
    with primary.client() as p, replica.client() as r:
        mine = int(p.info("replication")["master_repl_offset"])
        info = r.info("replication")
    return mine, int(info.get("slave_repl_offset", -1)), str(info.get("master_link_status"))


def wait_replicated(primary: RedisNode, replica: RedisNode, timeout: float = 10.0) -> None:
    """Until the replica's link is up and it has everything the primary wrote so far."""
    deadline = time.monotonic() + timeout
    while True:
        mine, theirs, link = replication_offsets(primary, replica)
        if link == "up" and theirs >= mine:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"replica at offset {theirs} of {mine} (link {link}):\n{replica.log()}")
        time.sleep(0.05)


@dataclass
class ReplicatedRedis:
    primary: RedisNode
    replica: RedisNode


@pytest.fixture
def replicated_redis(start_redis_node: StartNode) -> ReplicatedRedis:
    """A primary and one replica (``--replicaof``), the replica in sync."""
    primary = start_redis_node("primary").wait_up()
    replica = start_redis_node("replica", ["--replicaof", "127.0.0.1", str(primary.port)]).wait_up()
    wait_replicated(primary, replica)
    return ReplicatedRedis(primary, replica)


@dataclass
class SentinelSet:
    """A primary, its replica and three Sentinels (quorum 2) watching them as ``master``."""

    primary: RedisNode
    replica: RedisNode
    sentinels: list[RedisNode]
    master: str = MASTER_NAME

    @property
    def sentinel_list(self) -> str:
        return ",".join(s.address for s in self.sentinels)

    def env(self) -> dict[str, str]:
        """A replica's settings for this set (and no EXTENDER_REDIS_URL)."""
        return {"EXTENDER_REDIS_SENTINELS": self.sentinel_list, "EXTENDER_REDIS_SENTINEL_MASTER": self.master}

    def named_primary(self) -> str | None:
        """The primary's address as the first Sentinel that answers names it."""
        for sentinel in self.sentinels:
            try:
                with sentinel.client() as client:
                    address: Any = client.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.master)
            except redis.RedisError:
                continue
            if address:
                return f"{address[0]}:{address[1]}"
        return None

    def wait_watching(self, timeout: float = 15.0) -> None:
        """Until every Sentinel knows the replica and the two other Sentinels (so a failover can be agreed)."""
        deadline = time.monotonic() + timeout
        state: dict[str, Any] = {}
        while True:
            ready = 0
            for sentinel in self.sentinels:
                with sentinel.client() as client:
                    state = client.execute_command("SENTINEL", "MASTER", self.master)
                    state = dict(zip(state[::2], state[1::2], strict=True)) if isinstance(state, list) else state
                if int(state["num-slaves"]) >= 1 and int(state["num-other-sentinels"]) >= 2:
                    ready += 1
            if ready == len(self.sentinels):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"Sentinels not watching within {timeout}s: {state}")
            time.sleep(0.1)

    def wait_promoted(self, node: RedisNode, timeout: float = 20.0) -> float:
        """Seconds until the Sentinels name ``node`` and it is a primary; fails with the Sentinels' logs."""
        started = time.monotonic()
        while True:
            if self.named_primary() == node.address:
                with node.client() as client:
                    if client.execute_command("ROLE")[0] == "master":
                        return time.monotonic() - started
            if time.monotonic() - started > timeout:
                logs = "\n".join(s.log()[-1500:] for s in self.sentinels)
                raise AssertionError(f"{node.name} not promoted within {timeout}s:\n{logs}")
            time.sleep(0.05)


def sentinel_conf(primary: RedisNode, master: str = MASTER_NAME, extra: tuple[str, ...] = ()) -> str:
    return "\n".join(
        [
            f"sentinel monitor {master} 127.0.0.1 {primary.port} 2",
            f"sentinel down-after-milliseconds {master} {DOWN_AFTER_MS}",
            f"sentinel failover-timeout {master} {FAILOVER_TIMEOUT_MS}",
            f"sentinel parallel-syncs {master} 1",
            *extra,
            "",
        ]
    )


def start_sentinel_set(
    start_redis_node: StartNode,
    data_args: list[str] | None = None,
    sentinel_extra: tuple[str, ...] = (),
    **credentials: str,
) -> SentinelSet:
    """Primary + replica (each with ``data_args``, clients logging in with ``credentials``) + three
    Sentinels, all up and agreed on who watches what."""
    args = data_args or []
    primary = start_redis_node("primary", args, **credentials).wait_up()
    replica = start_redis_node("replica", [*args, "--replicaof", "127.0.0.1", str(primary.port)], **credentials)
    conf = sentinel_conf(primary, extra=sentinel_extra)
    sentinels = [start_redis_node(f"sentinel{i}", sentinel_conf=conf) for i in range(3)]
    for node in (replica, *sentinels):
        node.wait_up()
    wait_replicated(primary, replica)
    found = SentinelSet(primary, replica, sentinels)
    found.wait_watching()
    return found


@pytest.fixture
def sentinel_set(start_redis_node: StartNode) -> SentinelSet:
    return start_sentinel_set(start_redis_node)


# A partition without network control: Redis's own links (the Sentinels' and replication's) use a user
# of their own, and the servers another, so turning the links' user off on one node cuts it off from
# the Sentinels and its replica while the servers' connections to it stay up. With the default user
# off, a link whose AUTH fails is not let in as the default user.
LINK_USER, LINK_PASSWORD = "link", "link-secret"
APP_USER, APP_PASSWORD = "app", "app-secret"
_USERS = [
    *("--user", "default", "off"),
    *("--user", LINK_USER, "on", f">{LINK_PASSWORD}", "~*", "&*", "+@all"),
    *("--user", APP_USER, "on", f">{APP_PASSWORD}", "~*", "&*", "+@all"),
    *("--masteruser", LINK_USER, "--masterauth", LINK_PASSWORD),
]


def cut_off(node: RedisNode) -> None:
    """Partition ``node`` from the Sentinels and the replication links; clients of ``APP_USER`` keep it."""
    with node.client() as client:
        client.execute_command("ACL", "SETUSER", LINK_USER, "off")
        client.execute_command("CLIENT", "KILL", "USER", LINK_USER)


def reconnect(node: RedisNode) -> None:
    with node.client() as client:
        client.execute_command("ACL", "SETUSER", LINK_USER, "on")


def wait_replica_of(node: RedisNode, primary: RedisNode, timeout: float = 60.0) -> float:
    """Seconds until ``node`` replicates ``primary`` with its link up (the Sentinels demote a returning primary)."""
    started = time.monotonic()
    while True:
        with node.client() as client:
            info = client.info("replication")
        following = info.get("role") == "slave" and int(info.get("master_port", 0)) == primary.port
        if following and info.get("master_link_status") == "up":
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise AssertionError(f"{node.name} not a replica of {primary.name} within {timeout}s: {info}")
        time.sleep(0.1)


@pytest.fixture
def partitionable_sentinel_set(start_redis_node: StartNode) -> SentinelSet:
    """A ``sentinel_set`` whose data nodes take ``APP_USER`` for clients and ``LINK_USER`` for Redis's own
    links, so that ``cut_off`` can partition one of them."""
    auth = (f"sentinel auth-user {MASTER_NAME} {LINK_USER}", f"sentinel auth-pass {MASTER_NAME} {LINK_PASSWORD}")
    return start_sentinel_set(start_redis_node, _USERS, auth, username=APP_USER, password=APP_PASSWORD)
