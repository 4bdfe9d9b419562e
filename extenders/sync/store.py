"""The cluster snapshot in Redis: one writer (the leader's watcher), every replica a reader.

Every consistent change is one Lua script (``extenders/lua/*.lua``), so a reader never sees a
pod half-moved, and each script bumps the cluster generation at most once.

Key layout, all under the prefix ``P`` (one Redis, or the primary Sentinel names; a Redis Cluster
node is refused, see ``extenders/sync/redis_connect.py`` and docs/ARCHITECTURE.md, Redis topologies):

``P:gen``             cluster generation (INCR once per changing script)
``P:nodes``           zset node name -> generation of its last change (tombstones stay: hash gone)
``P:node:{name}``     hash ``_node`` -> NodeFacts record (resourceVersion left out), ``{uid}`` ->
                      PodInfo record of every pod bound or assumed there; pods may name a node
                      that has no ``_node`` (yet), as in kube-scheduler's cache
``P:noderv``          hash node name -> resourceVersion of its stored facts (kept out of the record
                      so a heartbeat that changes nothing else does not bump the generation)
``P:nodegone``        hash node name -> resourceVersion of the watcher's delete: a request carrying a
                      copy no newer than that cannot bring the node back; ``P:nodegonez`` name -> time
                      of the delete (ms), so markers older than a day are pruned
``P:podloc``          hash uid -> node name, for every placed pod
``P:pending``         hash uid -> PodInfo record of unbound, non-terminal pods; ``P:pendingz`` uid -> gen
``P:pdb``/``P:pdbz``  PodDisruptionBudgets by namespace/name
``P:podgroup``/``P:podgroupz``  PodGroups by namespace/name: ``{"minMember", "creationTimestamp", "uid", …}``
``P:ns``/``P:nsz``    Namespaces' labels by name (for affinity terms' namespaceSelector)
``P:pvc``/``P:pvcz``  PersistentVolumeClaims by namespace/name: whether ReadWriteOncePod is among their modes
``P:svc``/``P:svcz``, ``P:rc``/``P:rcz``, ``P:rs``/``P:rsz``, ``P:sts``/``P:stsz``  Services,
                      ReplicationControllers, ReplicaSets and StatefulSets by namespace/name: only
                      their ``spec.selector`` (the spreading scorers' default selector)
``P:assumed``         zset uid -> deadline (ms, Redis clock) of pods assumed but not yet confirmed
``P:refused``/``P:refusedpod``  pods filter refused on every node in the last seconds (zset uid ->
                      time, hash uid -> namespace/name); ``P:requeued`` uid -> time of its last requeue;
                      ``P:retrygen`` generation of the last change kube-scheduler retries parked pods on
``P:tombs``           zset ``n:|p:|d:|g:|s:|c:|v:|o:|e:|t:`` + id -> generation of the delete, for compaction
``P:floor``           generation below which tombstones were compacted (older replicas reload)
``P:synced``          set by the leader once its initial list of every watched resource is written
``P:leader``          lease ``holder|epoch`` (SET PX); ``P:epoch`` fencing counter (INCR per term)
``P:eq:{scope}:…``    the equivalence cache's shared tier, when on (see extenders/equivalence/shared.py)
``P:storeid``         random id of this history of the keys (SET NX by whoever first finds it
                      missing): if Redis loses its data the generation restarts at 0 and the id
                      changes, so a replica reloads instead of applying a delta from another
                      history, and a leader from before the loss is fenced even if the new epoch
                      counter reaches its epoch again
``P:server``          run id of the Redis server process that last served these keys; a new
                      connection to another one (a failover) sets a new ``P:storeid`` and drops the
                      lease (``extenders/sync/redis_connect.py``, ``lua/history.lua``)
``P:acks``            counter written just before ``WAIT`` (``Store.replicated``), so the wait
                      covers everything written before it on any connection
"""

from __future__ import annotations

import enum
import secrets
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import redis.asyncio as aredis
from redis.asyncio.connection import AbstractConnection
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError, ResponseError

from extenders import lua
from extenders.model import (
    ControllerInfo,
    NamespaceInfo,
    NodeFacts,
    PDBInfo,
    PodGroupInfo,
    PodInfo,
    PVCInfo,
    ServiceInfo,
)
from extenders.sync.records import (
    CONTROLLER,
    NAMESPACE,
    NODE,
    PDB,
    POD,
    PODGROUP,
    PVC,
    SERVICE,
    decode_node_hash,
    podgroup_from,
    reserved_pod,
)

_SCRIPTS = (
    "apply",
    "assume",
    "forget",
    "expire",
    "touch_assumed",
    "refresh_node",
    "catchup",
    "compact",
    "refuse",
)
_LEASE_SCRIPTS = ("lease_acquire", "lease_renew", "lease_release")


class FencedError(RuntimeError):
    """A write by a leader whose term is over: another replica took the lease since."""


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


@dataclass(slots=True, frozen=True)
class Op:
    """One watcher write; a batch of them is applied atomically by ``Store.apply``."""

    code: str
    id: str
    arg: str = ""
    payload: bytes | str = b""

    @classmethod
    def node(cls, facts: NodeFacts) -> Op:
        return cls("N", facts.name, facts.resource_version, NODE.dumps(facts))

    @classmethod
    def delete_node(cls, name: str, resource_version: str = "") -> Op:
        """``resource_version``: the deleted object's last one (or the list's, for a relist's delete)."""
        return cls("n", name, resource_version)

    @classmethod
    def pod(cls, pod: PodInfo) -> Op:
        """Add, confirm (clears ``assumed``), update or move a pod; terminal pods are removed."""
        if pod.terminal:
            return cls.delete_pod(pod.uid)
        stored = replace(pod, assumed=False) if pod.assumed else pod
        return cls("P", pod.uid, pod.node_name, POD.dumps(stored))

    @classmethod
    def delete_pod(cls, uid: str) -> Op:
        return cls("p", uid)

    @classmethod
    def delete_pod_unless_assumed(cls, uid: str) -> Op:
        """A relist's delete: a pod assumed by some replica is a reservation the list cannot judge."""
        return cls("q", uid)

    @classmethod
    def pdb(cls, pdb: PDBInfo) -> Op:
        return cls("D", pdb.key, "", PDB.dumps(pdb))

    @classmethod
    def delete_pdb(cls, key: str) -> Op:
        return cls("d", key)

    @classmethod
    def podgroup(cls, group: PodGroupInfo) -> Op:
        return cls("G", group.key, "", PODGROUP.dumps(group))

    @classmethod
    def delete_podgroup(cls, key: str) -> Op:
        return cls("g", key)

    @classmethod
    def namespace(cls, namespace: NamespaceInfo) -> Op:
        return cls("A", namespace.name, "", NAMESPACE.dumps(namespace))

    @classmethod
    def delete_namespace(cls, name: str) -> Op:
        return cls("a", name)

    @classmethod
    def pvc(cls, claim: PVCInfo) -> Op:
        return cls("C", claim.key, "", PVC.dumps(claim))

    @classmethod
    def delete_pvc(cls, key: str) -> Op:
        return cls("c", key)

    @classmethod
    def service(cls, service: ServiceInfo) -> Op:
        return cls("V", service.key, "", SERVICE.dumps(service))

    @classmethod
    def delete_service(cls, key: str) -> Op:
        return cls("v", key)

    @classmethod
    def replication_controller(cls, controller: ControllerInfo) -> Op:
        return cls("O", controller.key, "", CONTROLLER.dumps(controller))

    @classmethod
    def delete_replication_controller(cls, key: str) -> Op:
        return cls("o", key)

    @classmethod
    def replica_set(cls, controller: ControllerInfo) -> Op:
        return cls("E", controller.key, "", CONTROLLER.dumps(controller))

    @classmethod
    def delete_replica_set(cls, key: str) -> Op:
        return cls("e", key)

    @classmethod
    def stateful_set(cls, controller: ControllerInfo) -> Op:
        return cls("T", controller.key, "", CONTROLLER.dumps(controller))

    @classmethod
    def delete_stateful_set(cls, key: str) -> Op:
        return cls("t", key)

    @classmethod
    def synced(cls, marker: str) -> Op:
        return cls("S", "", "", marker)


class AssumeStatus(enum.Enum):
    ASSUMED = "assumed"
    CONFLICT = "conflict"  # the node's generation moved since the caller checked the fit
    ALREADY_BOUND = "bound"  # the watch already saw the pod bound (to ``node``)


@dataclass(slots=True, frozen=True)
class AssumeResult:
    status: AssumeStatus
    generation: int = 0  # the node's generation: after the write, or the current one on conflict
    node: str = ""  # where the pod is bound, for ALREADY_BOUND

    @property
    def ok(self) -> bool:
        return self.status is AssumeStatus.ASSUMED


@dataclass(slots=True, frozen=True)
class Lease:
    """A held leader lease: ``value`` is what renew/release compare against."""

    holder: str
    epoch: int
    value: str
    store_id: str = ""  # the store history the term began in; writes outside it are fenced


@dataclass(slots=True, frozen=True)
class LeaseAttempt:
    lease: Lease | None
    retry_ms: int  # how long the current holder's lease still runs (when not acquired)
    holder: str = ""


@dataclass(slots=True)
class CatchUp:
    """A replica's raw delta, decoded by ``extenders.sync.cache``."""

    generation: int
    reload: bool = False  # also set when the store id changed since this Store last saw it
    nodes: list[tuple[str, int, str, dict[str, bytes]]] | None = None  # (name, gen, rv, fields); {} = gone
    pending: list[tuple[str, bytes | None]] | None = None
    pdbs: list[tuple[str, bytes | None]] | None = None
    podgroups: list[tuple[str, bytes | None]] | None = None
    store_id: str = ""  # the store history this reply comes from (see ``P:storeid``)
    namespaces: list[tuple[str, bytes | None]] | None = None
    pvcs: list[tuple[str, bytes | None]] | None = None
    services: list[tuple[str, bytes | None]] | None = None
    replication_controllers: list[tuple[str, bytes | None]] | None = None
    replica_sets: list[tuple[str, bytes | None]] | None = None
    stateful_sets: list[tuple[str, bytes | None]] | None = None

    @property
    def changed(self) -> bool:
        return self.reload or self.nodes is not None


def _pairs(flat: Sequence[Any]) -> list[tuple[str, Any]]:
    return [(_text(flat[i]), flat[i + 1]) for i in range(0, len(flat), 2)]


def _hash(flat: Sequence[Any]) -> dict[str, bytes]:
    return {_text(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}


def holder_replica(holder_value: str) -> str:
    """The replica id inside a lease value ``replica#token|epoch``."""
    return holder_value.rsplit("|", 1)[0].rsplit("#", 1)[0]


class Store:
    """Typed access to the snapshot keys; every method is one round trip unless it says otherwise."""

    def __init__(
        self, redis: aredis.Redis, prefix: str = "extender", *, min_replicas_ack: int = 0, ack_timeout: float = 1.0
    ) -> None:
        self.redis = redis
        self.prefix = prefix
        # Replicas that must hold a reservation before the API binds on it (``replicated``); 0: none.
        self.min_replicas_ack = min_replicas_ack
        self.ack_timeout = ack_timeout
        self._scripts: dict[str, AsyncScript] = {
            **lua.register(redis, _SCRIPTS, head=("prelude",)),
            **lua.register(redis, _LEASE_SCRIPTS, head=("lease_prelude",)),
        }
        self._fence: tuple[int, str] | None = None  # (epoch, store id) of the last lease acquired here
        self._seen_store_id: str | None = None  # the store history of the last full load's index
        self._reader: AbstractConnection | None = None  # held for catch-ups (see ``_catch_up_reply``)
        self._reader_busy = False

    def key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    def node_key(self, name: str) -> str:
        return f"{self.prefix}:node:{name}"

    async def _run(self, name: str, *args: Any) -> Any:
        return await self._scripts[name](args=[self.prefix, *args])

    # --- the watcher's writes (fenced) -------------------------------------------------------

    async def apply(self, epoch: int, ops: Iterable[Op]) -> int:
        """Apply a batch atomically as the leader of term ``epoch``; returns the cluster generation.

        Raises FencedError (and writes nothing) when another term has started since.
        """
        return (await self.apply_and_take_refused(epoch, ops))[0]

    async def apply_and_take_refused(
        self, epoch: int, ops: Iterable[Op], window: float | None = None, interval: float = 10.0
    ) -> tuple[int, list[tuple[str, str]]]:
        """``apply``; with ``window`` (seconds), also the pods filter refused within it, when this
        batch freed capacity, changed a node's facts or placed a pod (each pod at most once per ``interval``):
        ``(generation, [(uid, namespace/name)])``."""
        if window is not None:
            ops = [*ops, Op("R", str(int(window * 1000)), str(int(interval * 1000)))]
        fence = self._fence
        # The epoch alone is not enough after Redis lost its data: the counter restarts and a new
        # leader may get this very epoch again. The store id of the term tells the two apart.
        args: list[Any] = [f"{epoch}@{fence[1]}" if fence and fence[0] == epoch else str(epoch)]
        for op in ops:
            args.extend((op.code, op.id, op.arg, op.payload))
        try:
            reply = await self._run("apply", *args)
        except ResponseError as exc:
            if str(exc).startswith("FENCED"):
                raise FencedError(str(exc)) from exc
            raise
        if not isinstance(reply, list):
            return int(reply), []
        return int(reply[0]), [(_text(reply[i]), _text(reply[i + 1])) for i in range(1, len(reply), 2)]

    async def record_refusal(self, uid: str, ref: str, generation: int, window: float, interval: float = 10.0) -> bool:
        """Filter refused ``ref`` on every node, on the snapshot of ``generation``. True: a change
        kube-scheduler may already have retried the pod on landed after that snapshot, so requeue it
        now; else the refusal is remembered for ``window`` seconds (see ``apply_and_take_refused``)."""
        reply = await self._run("refuse", uid, ref, int(window * 1000), generation, int(interval * 1000))
        return bool(int(reply))

    async def add_pod(self, epoch: int, pod: PodInfo) -> int:
        """The watch saw a pod: add it, or confirm it if assumed (also covers updates and moves)."""
        return await self.apply(epoch, [Op.pod(pod)])

    update_pod = add_pod

    async def remove_pod(self, epoch: int, uid: str) -> int:
        return await self.apply(epoch, [Op.delete_pod(uid)])

    async def put_node(self, epoch: int, facts: NodeFacts) -> int:
        return await self.apply(epoch, [Op.node(facts)])

    async def mark_synced(self, epoch: int, marker: str) -> int:
        return await self.apply(epoch, [Op.synced(marker)])

    # --- any replica -------------------------------------------------------------------------

    async def assume_pod(
        self, pod: PodInfo, node: str, expected_node_generation: int | None = None, ttl: float = 60.0
    ) -> AssumeResult:
        """Reserve ``pod`` on ``node`` until the watch confirms it or ``ttl`` seconds pass.

        With ``expected_node_generation`` this is a compare-and-set: nothing is written and
        CONFLICT comes back when the node changed since the caller validated the fit. Assuming
        again (same or another node) moves the reservation and renews the deadline.
        """
        record = reserved_pod(pod, node)
        expected = "" if expected_node_generation is None else str(int(expected_node_generation))
        reply = await self._run("assume", pod.uid, node, record, expected, int(ttl * 1000))
        status = AssumeStatus(_text(reply[0]))
        if status is AssumeStatus.ALREADY_BOUND:
            return AssumeResult(status, node=_text(reply[1]))
        return AssumeResult(status, generation=int(reply[1]))

    async def forget_pod(self, uid: str, node: str | None = None) -> bool:
        """Drop an assumed pod (its bind failed); a pod the watch confirmed is left alone."""
        return bool(await self._run("forget", uid, node or ""))

    async def touch_assumed(self, uid: str, ttl: float) -> bool:
        """Renew an assumed pod's deadline; False when it is no longer assumed."""
        return bool(await self._run("touch_assumed", uid, int(ttl * 1000)))

    async def expire_assumed(self, limit: int = 1000) -> list[str]:
        """Remove assumed pods past their deadline (any replica may sweep); returns their uids."""
        return [_text(u) for u in await self._run("expire", limit)]

    async def refresh_node_if_newer(self, facts: NodeFacts) -> bool:
        """Store node facts seen in a request if their resourceVersion is newer and they differ."""
        return bool(await self._run("refresh_node", facts.name, facts.resource_version, NODE.dumps(facts)))

    async def compact(self, upto_generation: int) -> int:
        """Drop tombstones up to a generation; returns the floor (replicas older than it reload)."""
        return int(await self._run("compact", int(upto_generation)))

    async def replicated(self) -> int | None:
        """None when no replica acknowledgement is asked for; else how many replicas hold every write
        made so far (``WAIT``, at most ``ack_timeout``), counted up to ``min_replicas_ack``.

        Replication is asynchronous: a failover may lose writes the old primary acknowledged. Called
        before an effect outside Redis (the API binding) rests on a reservation. ``WAIT`` covers the
        writes of its own connection, so it follows a write on that connection (one pipeline), and
        replication is one ordered stream, so the writes of every other connection before it too."""
        if self.min_replicas_ack <= 0:
            return None
        async with self.redis.pipeline(transaction=False) as pipe:  # WAIT is not allowed inside MULTI
            pipe.incr(self.key("acks"))
            pipe.execute_command("WAIT", self.min_replicas_ack, max(1, int(self.ack_timeout * 1000)))
            _, acked = await pipe.execute()
        return int(acked)

    # --- the leader lease ----------------------------------------------------------------------

    async def acquire_lease(self, holder: str, ttl: float) -> LeaseAttempt:
        """Take the lease if free; the term is fenced by its epoch and the store id.

        The store id is read first (two round trips): if the data is lost between the two, the
        id this term carries is no longer the store's, so its writes are fenced (the safe way).
        """
        store_id = await self.store_id()
        reply = await self._run("lease_acquire", holder, int(ttl * 1000))
        epoch = int(reply[0])
        if epoch:
            self._fence = (epoch, store_id)
            return LeaseAttempt(Lease(holder, epoch, f"{holder}|{epoch}", store_id), 0)
        return LeaseAttempt(None, max(0, int(reply[1])), _text(reply[2]))

    async def renew_lease(self, lease: Lease, ttl: float) -> bool:
        return bool(await self._run("lease_renew", lease.value, int(ttl * 1000)))

    async def release_lease(self, lease: Lease) -> bool:
        return bool(await self._run("lease_release", lease.value))

    async def leader(self) -> str | None:
        """The replica id holding the lease, if any."""
        value = await self.redis.get(self.key("leader"))
        return holder_replica(_text(value)) if value else None

    async def epoch(self) -> int:
        return int(await self.redis.get(self.key("epoch")) or 0)

    # --- reads ---------------------------------------------------------------------------------

    async def store_id(self) -> str:
        """The id of the store's current history, created (SET NX) if missing."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(self.key("storeid"), secrets.token_hex(8), nx=True)
            pipe.get(self.key("storeid"))
            _, value = await pipe.execute()
        return _text(value)

    def _other_history(self, store_id: str) -> bool:
        """True when a catch-up comes from another history than the last full load's (``node_index``).

        Not consumed by asking: every catch-up says so until the caller loads in full again.
        """
        if self._seen_store_id is None:
            self._seen_store_id = store_id
        return self._seen_store_id != store_id

    async def generation(self) -> int:
        return int(await self.redis.get(self.key("gen")) or 0)

    async def synced(self) -> str | None:
        value = await self.redis.get(self.key("synced"))
        return _text(value) if value is not None else None

    async def catch_up(self, since: int, max_items: int) -> CatchUp:
        """Everything changed after generation ``since``, read atomically (one round trip).

        ``reload`` is set as well when the store id differs from the one this Store's last
        ``node_index`` (the start of a full load) saw: the data was lost and rebuilt since, so
        generations from before mean nothing now (the caller must load everything again).
        """
        reply = await self._catch_up_reply(int(since), int(max_items), secrets.token_hex(8))
        gen, store_id = int(reply[0]), _text(reply[1])
        if self._other_history(store_id):
            return CatchUp(gen, reload=True, store_id=store_id)
        if len(reply) == 2:
            return CatchUp(gen, store_id=store_id)
        if _text(reply[2]) == "reload":
            return CatchUp(gen, reload=True, store_id=store_id)
        nodes = [(_text(n[0]), int(n[1]), _text(n[2]) if n[2] else "", _hash(n[3])) for n in reply[3]]
        return CatchUp(
            gen,
            False,
            nodes,
            _pairs(reply[4]),
            _pairs(reply[5]),
            _pairs(reply[6]),
            store_id,
            namespaces=_pairs(reply[7]),
            pvcs=_pairs(reply[8]),
            services=_pairs(reply[9]),
            replication_controllers=_pairs(reply[10]),
            replica_sets=_pairs(reply[11]),
            stateful_sets=_pairs(reply[12]),
        )

    async def _catch_up_reply(self, *args: Any) -> Any:
        """The catch-up script's reply, over a connection this store holds for it when it can.

        Every filter and bind waits for a catch-up; the pool's checkout and the client's command
        layers cost about half of its CPU at a replica (measured). Catch-ups do not overlap (the
        snapshot cache runs one at a time); one that would, or that finds the script gone, goes the
        ordinary way.
        """
        if self._reader_busy:
            return await self._run("catchup", *args)
        self._reader_busy = True
        try:
            reply = await self._held_catch_up(args)
        finally:
            self._reader_busy = False
        return reply if reply is not None else await self._run("catchup", *args)

    async def _held_catch_up(self, args: tuple[Any, ...]) -> Any:
        """The reply on the held connection; None when Redis no longer has the script (after a restart:
        the ordinary path loads it)."""
        started = time.perf_counter()
        pool = self.redis.connection_pool
        try:
            if self._reader is None:
                self._reader = await pool.get_connection()  # type: ignore[no-untyped-call]
            # The pool's own check at checkout: connected (a Sentinel-managed connection asks Sentinel
            # for the primary), and opened again if the server closed it.
            await pool.ensure_connection(self._reader)
            await self._reader.send_command("EVALSHA", self._scripts["catchup"].sha, 0, self.prefix, *args)
            reply = await self._reader.read_response()
        except NoScriptError:
            return None
        except Exception:
            self._observe(started, failed=True)
            raise
        self._observe(started)
        return reply

    def _observe(self, started: float, failed: bool = False) -> None:
        """The held catch-up in ``extender_redis_*``, as every other command is."""
        observe = getattr(self.redis, "observe", None)
        if observe is not None:
            observe("catchup", time.perf_counter() - started, failed)

    async def node_index(self) -> tuple[int, dict[str, int]]:
        """The cluster generation and every node's generation (tombstones included), read together.

        The store id is read with them and remembered, so the ``catch_up`` that ends a full load
        reports ``reload`` if the data was lost in between.
        """
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(self.key("storeid"), secrets.token_hex(8), nx=True)
            pipe.get(self.key("storeid"))
            pipe.get(self.key("gen"))
            pipe.zrange(self.key("nodes"), 0, -1, withscores=True)
            _, store_id, gen, scored = await pipe.execute()
        self._seen_store_id = _text(store_id)
        return int(gen or 0), {_text(n): int(s) for n, s in scored}

    async def node_hashes(self, names: Sequence[str], batch: int = 256) -> dict[str, dict[str, bytes]]:
        """Node hashes by name, pipelined in batches (one round trip per batch)."""
        out: dict[str, dict[str, bytes]] = {}
        for start in range(0, len(names), batch):
            chunk = names[start : start + batch]
            async with self.redis.pipeline(transaction=False) as pipe:
                for name in chunk:
                    pipe.hgetall(self.node_key(name))
                results = await pipe.execute()
            for name, fields in zip(chunk, results, strict=True):
                out[name] = {_text(k): v for k, v in fields.items()}
        return out

    async def hash_all(self, name: str) -> dict[str, bytes]:
        """A whole record hash (``noderv``, ``pending``, ``pdb``, ``podgroup``, ``ns``, ``pvc``, ``svc``, ``rc``,
        ``rs``, ``sts``), scanned in pages."""
        out: dict[str, bytes] = {}
        async for k, v in self.redis.hscan_iter(self.key(name), count=2000):
            out[_text(k)] = v
        return out

    async def hash_keys(self, name: str) -> set[str]:
        return {_text(k) for k in await self.redis.hkeys(self.key(name))}

    async def placed_pods(self) -> dict[str, str]:
        """uid -> node for every placed pod (bound or assumed)."""
        return {k: _text(v) for k, v in (await self.hash_all("podloc")).items()}

    async def assumed_pods(self) -> dict[str, int]:
        """uid -> deadline (ms since the epoch, Redis clock) of every assumed pod."""
        scored: list[Any] = await self.redis.zrange(self.key("assumed"), 0, -1, withscores=True)
        return {_text(k): int(v) for k, v in scored}

    async def node_generation(self, name: str) -> int:
        score = await self.redis.zscore(self.key("nodes"), name)
        return int(score or 0)

    async def get_podgroup(self, namespace: str, name: str) -> PodGroupInfo | None:
        key = f"{namespace}/{name}"
        raw = await self.redis.hget(self.key("podgroup"), key)
        return podgroup_from(key, raw) if raw else None

    async def read_node(self, name: str) -> tuple[NodeFacts | None, dict[str, PodInfo]]:
        """One node's stored facts and pods (for tests and tools; replicas use the cache)."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hgetall(self.node_key(name))
            pipe.hget(self.key("noderv"), name)
            results: list[Any] = await pipe.execute()
        fields: dict[bytes, bytes] = results[0]
        rv: bytes | None = results[1]
        return decode_node_hash({_text(k): v for k, v in fields.items()}, rv.decode() if rv else "")
