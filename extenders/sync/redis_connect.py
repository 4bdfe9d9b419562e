"""Every Redis connection pool of a replica comes from here: one URL, or a primary found through Sentinel.

Whatever the topology, each new connection first checks the server it reached (see ``ServerCheck``):
a Redis Cluster node is refused with a clear error, and a server process other than the one that
last served the key prefix starts a new store history (``extenders/lua/history.lua``), because a
promoted replica may lack writes the old primary acknowledged.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from dataclasses import dataclass, field
from typing import Any

import redis
import redis.asyncio as aredis
import redis.sentinel as sync_sentinel
from redis.asyncio.connection import (
    AbstractConnection,
    BlockingConnectionPool,
    Connection,
    SSLConnection,
    UnixDomainSocketConnection,
    parse_url,
)
from redis.asyncio.retry import Retry as AsyncRetry
from redis.asyncio.sentinel import (
    Sentinel,
    SentinelConnectionPool,
    SentinelManagedConnection,
    SentinelManagedSSLConnection,
)
from redis.backoff import NoBackoff
from redis.exceptions import NoPermissionError, RedisError, ResponseError
from redis.maint_notifications import MaintNotificationsConfig
from redis.retry import Retry

from extenders import lua
from extenders.aio import cancel_and_wait

log = logging.getLogger(__name__)

CLUSTER_REFUSAL = (
    "runs in cluster mode (cluster_enabled:1), which this extender does not support: its Lua scripts "
    "read and write keys they do not declare, so they cannot be routed to slots; use a standalone "
    "Redis, or a primary with replicas under Sentinel (docs/ARCHITECTURE.md, Redis topologies)"
)


class UnsupportedRedisError(RedisError):
    """The server reached is of a kind the extender refuses to run on (a Redis Cluster node)."""


def parse_sentinels(text: str) -> tuple[tuple[str, int], ...]:
    """``host:port,host:port`` (``[v6]:port`` for IPv6) as pairs; ValueError saying what is wrong."""
    out: list[tuple[str, int]] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{item!r} is not host:port")
        out.append((host, int(port)))
    if not out:
        raise ValueError("no host:port in the list")
    return tuple(out)


@dataclass(frozen=True, slots=True)
class RedisTarget:
    """Which Redis to use: ``url`` alone, or ``sentinels`` + ``sentinel_master`` with ``url`` (if set)
    carrying only the data nodes' credentials, database and TLS options (it has no host then)."""

    url: str | None = None
    sentinels: tuple[tuple[str, int], ...] = ()
    sentinel_master: str | None = None
    sentinel_password: str | None = field(default=None, repr=False)

    @property
    def uses_sentinel(self) -> bool:
        return bool(self.sentinels)

    @property
    def sentinel_list(self) -> str:
        return ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.sentinels)

    def url_options(self) -> dict[str, Any]:
        """What the URL says about connections (credentials, db, TLS, connection class), as redis-py reads it."""
        return dict(parse_url(self.url)) if self.url else {}


@dataclass(frozen=True, slots=True)
class PoolOptions:
    max_connections: int = 64
    timeout: float = 3.0  # connect and read timeout, and the wait for a pooled connection
    history_prefix: str | None = None  # the key prefix whose store history ServerCheck guards; None: no check
    client_name: str | None = None  # CLIENT SETNAME of every connection (operators see who holds them)
    primary_check_seconds: float = 1.0  # how often a Sentinel pool asks which server is the primary


def _info_fields(raw: Any) -> dict[str, str]:
    text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and not key.startswith("#"):
            fields[key.strip()] = value.strip()
    return fields


class ServerCheck(AbstractConnection):
    """Runs after the handshake (AUTH, SELECT) of every new connection, before its first command.

    ``INFO server`` and ``INFO cluster`` tell which server process this is and whether it is a
    Cluster node. A server whose INFO is not allowed (renamed, or an ACL without ``+info``) is used
    without the history check."""

    history_prefix: str | None = None
    _no_info_logged = False  # one warning per process, not one per connection

    async def on_connect_check_health(self, check_health: bool = True) -> None:
        await super().on_connect_check_health(check_health)
        asked = self.pack_commands([("INFO", "server"), ("INFO", "cluster")])
        await self.send_packed_command(asked, check_health=False)
        replies: list[Any] = []
        for _ in range(2):  # both replies are read, so an error leaves none behind on the connection
            try:
                replies.append(await self.read_response())
            except (NoPermissionError, ResponseError) as exc:
                replies.append(exc)
        refused = next((r for r in replies if isinstance(r, ResponseError)), None)
        if refused is not None:
            if not ServerCheck._no_info_logged:
                ServerCheck._no_info_logged = True
                log.warning("Redis at %s refuses INFO (%s): failover detection is off", self._where(), refused)
            return
        server, cluster = _info_fields(replies[0]), _info_fields(replies[1])
        if cluster.get("cluster_enabled") == "1":
            raise UnsupportedRedisError(f"Redis at {self._where()} {CLUSTER_REFUSAL}")
        run_id = server.get("run_id")
        if self.history_prefix is None or not run_id:
            return
        token = secrets.token_hex(8)
        await self.send_command(
            "EVAL", lua.source("history"), 0, self.history_prefix, run_id, token, check_health=False
        )
        if int(await self.read_response()):
            log.warning(
                "Redis at %s (run id %s) is not the server process that last served prefix %r (a failover, or "
                "a restart that reloaded older data): started store history %s; replicas reload, the leader relists",
                self._where(),
                run_id[:12],
                self.history_prefix,
                token,
            )

    def _where(self) -> str:
        host, port, path = getattr(self, "host", None), getattr(self, "port", None), getattr(self, "path", None)
        return f"{host}:{port}" if host else str(path)


def _init_check(conn: ServerCheck, kwargs: dict[str, Any]) -> dict[str, Any]:
    conn.history_prefix = kwargs.pop("history_prefix", None)
    return kwargs


class CheckedConnection(ServerCheck, Connection):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**_init_check(self, kwargs))


class CheckedSSLConnection(ServerCheck, SSLConnection):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**_init_check(self, kwargs))


class CheckedUnixConnection(ServerCheck, UnixDomainSocketConnection):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**_init_check(self, kwargs))


class CheckedSentinelConnection(ServerCheck, SentinelManagedConnection):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**_init_check(self, kwargs))  # type: ignore[no-untyped-call]


class CheckedSentinelSSLConnection(ServerCheck, SentinelManagedSSLConnection):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**_init_check(self, kwargs))  # type: ignore[no-untyped-call]


class BlockingSentinelConnectionPool(SentinelConnectionPool, BlockingConnectionPool):
    """Sentinel's pool, which waits for a free connection as the URL pool does instead of failing a burst.

    redis-py drops only idle connections when Sentinel names another primary; one in use then goes back
    to the pool still connected to the old server. If that server is alive (a split brain), the replica
    would go on using both, so such a connection is closed when it comes back and before it is used again
    (``ensure_connection``); a subscription, which holds its connection without either, asks
    ``reaches_primary``."""

    primary_changes = 0  # times Sentinel named another primary than the one this pool used (the metric)

    @property
    def primary(self) -> str | None:
        address = self.master_address
        return f"{address[0]}:{address[1]}" if address else None

    def reaches_primary(self, connection: AbstractConnection) -> bool:
        """False for an open connection to a server Sentinel no longer names the primary."""
        address: tuple[str, int] | None = self.master_address
        if address is None or not connection.is_connected:
            return True
        return (getattr(connection, "host", None), getattr(connection, "port", None)) == address

    async def get_master_address(self) -> tuple[str, int]:
        address: tuple[str, int] = await self.sentinel_manager.discover_master(self.service_name)
        if self.master_address != address:
            previous, self.master_address = self.master_address, address
            # Counted with the switch, before the await below: whoever sees the new primary sees it counted.
            if previous is not None:
                self.primary_changes += 1
                log.warning(
                    "Sentinel names %s:%s the primary (was %s:%s): connections to the old one are closed",
                    *address,
                    *previous,
                )
            await self.disconnect(inuse_connections=False)
        return address

    async def ensure_connection(self, connection: AbstractConnection) -> None:
        """At every checkout, and before each use of a connection held outside it (the catch-up reader)."""
        if not self.reaches_primary(connection):
            await connection.disconnect()  # opened again below, to the primary Sentinel names now
        await super().ensure_connection(connection)

    async def release(self, connection: AbstractConnection) -> None:
        if not self.reaches_primary(connection):
            await connection.disconnect()
        await super().release(connection)


def reaches_primary(pool: aredis.ConnectionPool, connection: AbstractConnection) -> bool:
    """Whether a connection held outside the pool's checkout still goes to the primary (always, without Sentinel)."""
    return not isinstance(pool, BlockingSentinelConnectionPool) or pool.reaches_primary(connection)


_CHECKED_CLASS: dict[type[AbstractConnection], type[AbstractConnection]] = {
    Connection: CheckedConnection,
    SSLConnection: CheckedSSLConnection,
    UnixDomainSocketConnection: CheckedUnixConnection,
}


def _socket_options(options: PoolOptions) -> dict[str, Any]:
    # Socket timeouts turn a half-open connection into an error the verbs report, instead of a hang.
    return {
        "socket_timeout": options.timeout,
        "socket_connect_timeout": options.timeout,
        "socket_keepalive": True,
    }


def _tls_options(url_options: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in url_options.items() if k.startswith("ssl_")}


class RedisPool:
    """One process's Redis connections: ``pool`` for the client, and the Sentinel set behind it if any."""

    def __init__(self, target: RedisTarget, options: PoolOptions) -> None:
        self.target = target
        self.sentinel: Sentinel | None = None
        self._check_interval = options.primary_check_seconds
        self._follower: asyncio.Task[None] | None = None
        url_options = target.url_options()
        kind: type[AbstractConnection] = url_options.pop("connection_class", Connection)
        tls = kind is SSLConnection
        common: dict[str, Any] = {
            **_socket_options(options),
            "max_connections": options.max_connections,
            "timeout": options.timeout,
            "health_check_interval": 10,
            "history_prefix": options.history_prefix,
            # redis-py 8 turns these on ("auto") by default, and a pool with them on skips its check that
            # a connection it hands out is still open: after a restart, a failover or an idle timeout,
            # each pooled connection would fail its first command. They need RESP3 and a server that
            # sends them; this client speaks RESP2.
            "maint_notifications_config": MaintNotificationsConfig(enabled=False),
            **url_options,  # as with from_url, what the URL says wins
        }
        if options.client_name and "client_name" not in url_options:
            common["client_name"] = options.client_name
        self.pool: aredis.ConnectionPool
        if target.uses_sentinel:
            assert target.sentinel_master, "a Sentinel target names its master"
            # No retries: redis-py's default backs off for seconds on a Sentinel that is down or refuses
            # the password, before asking the next one.
            sentinel_kwargs: dict[str, Any] = {
                **_socket_options(options),
                "password": target.sentinel_password,
                "retry": AsyncRetry(NoBackoff(), 0),
            }
            if tls:  # sentinels of a TLS deployment speak TLS too, with the same CA and client certificate
                sentinel_kwargs.update(ssl=True, **_tls_options(url_options))
            self.sentinel = Sentinel(list(target.sentinels), sentinel_kwargs=sentinel_kwargs)  # type: ignore[no-untyped-call]
            self.pool = BlockingSentinelConnectionPool(  # type: ignore[no-untyped-call]
                target.sentinel_master,
                self.sentinel,
                connection_class=CheckedSentinelSSLConnection if tls else CheckedSentinelConnection,
                **common,
            )
        else:
            assert target.url, "a URL target has a URL"
            # Not from_url: it would put back the plain connection class the URL's scheme implies.
            self.pool = BlockingConnectionPool(connection_class=_CHECKED_CLASS[kind], **common)

    @property
    def primary(self) -> str | None:
        """The primary's address as Sentinel last named it (None: no Sentinel, or not asked yet)."""
        return self.pool.primary if isinstance(self.pool, BlockingSentinelConnectionPool) else None

    @property
    def primary_changes(self) -> int:
        """How often Sentinel named a new primary while this process ran (0 without Sentinel)."""
        return self.pool.primary_changes if isinstance(self.pool, BlockingSentinelConnectionPool) else 0

    def start(self) -> None:
        """Under Sentinel, ask it every ``primary_check_seconds`` which server is the primary.

        redis-py asks only when it opens a connection, so a replica whose connections all stay open
        would never leave a primary that Sentinel replaced but that is still reachable."""
        if isinstance(self.pool, BlockingSentinelConnectionPool) and self._follower is None:
            self._follower = asyncio.create_task(self._follow(self.pool), name="redis-primary-check")

    async def _follow(self, pool: BlockingSentinelConnectionPool) -> None:
        while True:
            await asyncio.sleep(self._check_interval)
            try:
                await pool.get_master_address()
            except (RedisError, OSError):
                pass  # no Sentinel answering is not news: connections fail on their own if the primary is gone
            except Exception:  # the check must outlive a surprise, or the replica could stay on an old primary
                log.exception("asking Sentinel for the primary failed")

    async def aclose(self) -> None:
        if self._follower is not None:
            await cancel_and_wait(self._follower)
        await self.pool.disconnect()
        if self.sentinel is not None:
            await self.sentinel.aclose()


def sync_client(target: RedisTarget, timeout: float) -> redis.Redis:
    """A blocking client to the same Redis (the primary, through Sentinel when configured), for start-up checks."""
    url_options = target.url_options()
    tls = url_options.pop("connection_class", None) is SSLConnection
    sockets: dict[str, Any] = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
    sockets["retry"] = Retry(NoBackoff(), 0)  # redis-py's default backs off for seconds on a server that is down
    if not target.uses_sentinel:
        assert target.url, "a URL target has a URL"
        return redis.Redis.from_url(target.url, **sockets)
    assert target.sentinel_master, "a Sentinel target names its master"
    sentinel_kwargs: dict[str, Any] = {**sockets, "password": target.sentinel_password}
    if tls:
        sentinel_kwargs.update(ssl=True, **_tls_options(url_options))
    manager = sync_sentinel.Sentinel(  # type: ignore[no-untyped-call]
        list(target.sentinels), sentinel_kwargs=sentinel_kwargs, **sockets
    )
    client: redis.Redis = manager.master_for(target.sentinel_master, ssl=tls, **url_options)  # type: ignore[no-untyped-call]
    return client


def cluster_refusal(target: RedisTarget, timeout: float = 2.0) -> str | None:
    """Why the configured Redis cannot be used (a Cluster node), or None: also when it cannot be
    reached now, since a replica starts without Redis and becomes ready when it answers."""
    try:
        with sync_client(target, timeout) as client:
            info = client.info("cluster")
            where = client.connection_pool.connection_kwargs
            address = f"{where.get('host')}:{where.get('port')}"
            if isinstance(client.connection_pool, sync_sentinel.SentinelConnectionPool):
                master = client.connection_pool.master_address
                address = f"{master[0]}:{master[1]}" if master else address
    except (RedisError, OSError):
        return None
    if int(info.get("cluster_enabled", 0)) == 1:
        return f"Redis at {address} {CLUSTER_REFUSAL}"
    return None
