"""The leader's feed from the Kubernetes API into the Redis snapshot.

Per resource (nodes, pods, PDBs and, when readable, PodGroups, Namespaces, PersistentVolumeClaims,
Services, ReplicationControllers, ReplicaSets and StatefulSets): list, write only what differs from
the store (deleting what vanished), then watch from the list's resourceVersion with bookmarks. A 410
Gone (HTTP status or ERROR event) means a fresh relist; connection errors re-watch from the last
applied resourceVersion after a backoff.
Events that arrive together are written as one fenced batch, so the write rate follows
Redis round trips rather than events.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import httpx
import orjson
from redis.exceptions import RedisError

from extenders.aio import raise_if_cancelling
from extenders.kube.client import PODGROUPS_PATH, GoneError, KubeApiError, KubeClient
from extenders.kube.requeue import (
    ERROR_RETRY_MAX_SECONDS,
    ERROR_RETRY_PER_SECOND,
    ERROR_RETRY_SECONDS,
    REFUSAL_WINDOW_SECONDS,
    REQUEUE_INTERVAL_SECONDS,
    PerSecond,
    PodRef,
    Requeuer,
    scheduling_error,
)
from extenders.quantity import QuantityError
from extenders.sync.convert import (
    controller_info,
    namespace_info,
    node_facts,
    object_key,
    pdb_info,
    pod_info,
    podgroup_info,
    pvc_info,
    service_info,
)
from extenders.sync.store import FencedError, Op, Store
from extenders.telemetry import Telemetry

log = logging.getLogger(__name__)


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = obj.get("metadata") or {}
    return meta


@dataclass(frozen=True, slots=True)
class Resource:
    """A watched collection: where it lives and how its objects become store writes."""

    kind: str
    path: str
    upsert: Callable[[dict[str, Any]], Op]
    delete: Callable[[dict[str, Any]], Op]
    identity: Callable[[dict[str, Any]], str]
    stored_hash: str  # the store hash whose keys are this resource's identities


def _pod_uid(obj: dict[str, Any]) -> str:
    return str(_meta(obj).get("uid") or "")


def _node_name(obj: dict[str, Any]) -> str:
    return str(_meta(obj).get("name") or "")


def _delete_node(obj: dict[str, Any]) -> Op:
    """The delete carries the object's last resourceVersion: a request-borne copy no newer stays out."""
    return Op.delete_node(_node_name(obj), str(_meta(obj).get("resourceVersion") or ""))


def _describe(kind: str, obj: Any) -> str:
    """``kind namespace/name`` of an object that may be malformed, for a log line that must not raise."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict):
        return f"{kind} <no metadata>"
    namespace, name = meta.get("namespace"), meta.get("name")
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


NODES = Resource(
    "nodes",
    "/api/v1/nodes",
    lambda o: Op.node(node_facts(o)),
    _delete_node,
    _node_name,
    "noderv",
)
PODS = Resource(
    "pods",
    "/api/v1/pods",
    lambda o: Op.pod(pod_info(o)),
    lambda o: Op.delete_pod(_pod_uid(o)),
    _pod_uid,
    "podloc",
)
PDBS = Resource(
    "poddisruptionbudgets",
    "/apis/policy/v1/poddisruptionbudgets",
    lambda o: Op.pdb(pdb_info(o)),
    lambda o: Op.delete_pdb(object_key(o)),
    object_key,
    "pdb",
)
PODGROUPS = Resource(
    "podgroups",
    PODGROUPS_PATH,
    lambda o: Op.podgroup(podgroup_info(o)),
    lambda o: Op.delete_podgroup(object_key(o)),
    object_key,
    "podgroup",
)
NAMESPACES = Resource(
    "namespaces",
    "/api/v1/namespaces",
    lambda o: Op.namespace(namespace_info(o)),
    lambda o: Op.delete_namespace(_node_name(o)),
    _node_name,  # cluster-scoped: the name alone
    "ns",
)
PVCS = Resource(
    "persistentvolumeclaims",
    "/api/v1/persistentvolumeclaims",
    lambda o: Op.pvc(pvc_info(o)),
    lambda o: Op.delete_pvc(object_key(o)),
    object_key,
    "pvc",
)
# The objects the spreading scorers' default selector is made of (their selectors only).
SERVICES = Resource(
    "services",
    "/api/v1/services",
    lambda o: Op.service(service_info(o)),
    lambda o: Op.delete_service(object_key(o)),
    object_key,
    "svc",
)
REPLICATION_CONTROLLERS = Resource(
    "replicationcontrollers",
    "/api/v1/replicationcontrollers",
    lambda o: Op.replication_controller(controller_info(o)),
    lambda o: Op.delete_replication_controller(object_key(o)),
    object_key,
    "rc",
)
REPLICA_SETS = Resource(
    "replicasets",
    "/apis/apps/v1/replicasets",
    lambda o: Op.replica_set(controller_info(o)),
    lambda o: Op.delete_replica_set(object_key(o)),
    object_key,
    "rs",
)
STATEFUL_SETS = Resource(
    "statefulsets",
    "/apis/apps/v1/statefulsets",
    lambda o: Op.stateful_set(controller_info(o)),
    lambda o: Op.delete_stateful_set(object_key(o)),
    object_key,
    "sts",
)
REQUIRED_RESOURCES = (NODES, PODS, PDBS)
# Watched only while readable: scheduling does without them (PodGroups when no CRD is installed,
# the others when RBAC does not grant them), so a 401/403/404 must not keep the store from being
# synced. Each is probed again every ``optional_recheck_seconds`` until readable.
OPTIONAL_RESOURCES = (PODGROUPS, NAMESPACES, PVCS, SERVICES, REPLICATION_CONTROLLERS, REPLICA_SETS, STATEFUL_SETS)
_TRANSIENT = (httpx.HTTPError, KubeApiError, RedisError, OSError, ValueError)
# Answers to an optional resource's probe that mean "not for us": no CRD, or RBAC does not allow it.
_UNAVAILABLE = (401, 403, 404)


@dataclass(slots=True)
class ParkedOnError:
    """A pod kube-scheduler parked after an attempt that failed on an error, and when to requeue it again."""

    message: str
    ref: PodRef
    due: float
    interval: float


@dataclass(slots=True)
class ResourceStats:
    lists: int = 0
    gone: int = 0
    watches: int = 0
    events: int = 0
    batches: int = 0
    errors: int = 0
    resource_version: str = ""
    last_error: str = ""


@dataclass(slots=True)
class WatcherStats:
    resources: dict[str, ResourceStats] = field(default_factory=dict)
    synced: bool = False

    def of(self, kind: str) -> ResourceStats:
        return self.resources.setdefault(kind, ResourceStats())


class Watcher:
    """Runs for one leadership term (``epoch``); every write is fenced by it."""

    def __init__(
        self,
        kube: KubeClient,
        store: Store,
        epoch: int,
        *,
        batch_size: int = 500,
        watch_timeout: int = 300,
        backoff_initial: float = 0.2,
        backoff_max: float = 10.0,
        optional_recheck_seconds: float = 60.0,
        min_watch_seconds: float = 1.0,
        telemetry: Telemetry | None = None,
        error_retry: tuple[float, float] = (ERROR_RETRY_SECONDS, ERROR_RETRY_MAX_SECONDS),
    ) -> None:
        self.kube = kube
        self.telemetry = telemetry or Telemetry()
        self.store = store
        self.epoch = epoch
        self.batch_size = batch_size
        self.watch_timeout = watch_timeout
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.optional_recheck_seconds = optional_recheck_seconds
        self.min_watch_seconds = min_watch_seconds
        self._warned: set[str] = set()  # optional resources already reported unreadable
        self.stats = WatcherStats()
        self._listed: set[str] = set()
        self._required: set[str] = set()
        self.requeuer = Requeuer(kube)
        self._requeues: set[asyncio.Task[int]] = set()
        self._errored: dict[str, ParkedOnError] = {}  # by pod uid
        self.error_retry = error_retry  # (first interval, longest) between requeues of one parked pod
        self._error_budget = PerSecond(ERROR_RETRY_PER_SECOND)  # requeues of pods parked on an error

    async def run(self) -> None:
        """Feed the store until cancelled; raises FencedError when this term is over."""
        readable = await asyncio.gather(*(self._retry(partial(self._readable, r)) for r in OPTIONAL_RESOURCES))
        resources = [*REQUIRED_RESOURCES, *(r for r, ok in zip(OPTIONAL_RESOURCES, readable, strict=True) if ok)]
        self._required = {r.kind for r in resources}
        async with asyncio.TaskGroup() as group:
            for resource in resources:
                group.create_task(self._run_resource(resource), name=f"watch-{resource.kind}")
            for resource, ok in zip(OPTIONAL_RESOURCES, readable, strict=True):
                if not ok:
                    group.create_task(self._await_readable(resource), name=f"watch-{resource.kind}-discovery")
            group.create_task(self._requeue_errored_again(), name="requeue-errored")

    async def _readable(self, resource: Resource) -> bool:
        """An optional resource's probe: 401/403/404 mean "run without it" (a 401/403 warned once),
        never a reason to wait.

        Only a transient failure (connection, 5xx) is retried, so nodes and pods are always watched
        even when RBAC does not grant the optional resources.
        """
        try:
            return await self.kube.readable(resource.path)
        except KubeApiError as exc:
            if isinstance(exc, GoneError) or exc.status not in _UNAVAILABLE:
                raise
            if resource.kind not in self._warned:
                self._warned.add(resource.kind)
                log.warning("%s not readable (%s): running without them; will re-check", resource.kind, exc)
            return False

    async def _retry(self, call: Callable[[], Any]) -> Any:
        failures = 0
        while True:
            try:
                return await call()
            except _TRANSIENT as exc:
                raise_if_cancelling()
                failures += 1
                log.warning("kubernetes API call failed (%s); retrying", exc)
                await asyncio.sleep(self._backoff(failures))

    def _backoff(self, failures: int) -> float:
        delay = min(self.backoff_max, self.backoff_initial * 2.0 ** (failures - 1))
        return float(delay * (0.5 + random.random() / 2))

    async def _await_readable(self, resource: Resource) -> None:
        """Start watching an optional resource once it becomes readable (CRD installed, RBAC granted)."""
        while True:
            await asyncio.sleep(self.optional_recheck_seconds)
            with contextlib.suppress(*_TRANSIENT):
                if await self._readable(resource):
                    log.info("%s readable now: watching them", resource.kind)
                    await self._run_resource(resource)
                    return

    async def _run_resource(self, resource: Resource) -> None:
        stats = self.stats.of(resource.kind)
        failures = 0
        rv = ""
        while True:
            raise_if_cancelling()
            try:
                if not rv:
                    rv = await self._relist(resource)
                    await self._listed_once(resource.kind)
                events, started = stats.events, time.monotonic()
                rv = await self._watch(resource, rv)
                if stats.events == events and time.monotonic() - started < self.min_watch_seconds:
                    # Ended at once with nothing in it (a proxy or server closing streams): do not
                    # turn that into a hot loop of watch requests.
                    failures += 1
                    delay = self._backoff(failures)
                    log.info("%s: watch ended at once with no events; re-watching in %.1fs", resource.kind, delay)
                    await asyncio.sleep(delay)
                else:
                    failures = 0
            except GoneError:
                stats.gone += 1
                log.info("%s: resourceVersion %s expired (410); relisting", resource.kind, rv)
                rv = ""
            except FencedError:
                raise
            except _TRANSIENT as exc:
                failures += 1
                stats.errors += 1
                stats.last_error = repr(exc)
                rv = stats.resource_version  # the last one actually written; "" forces a relist
                delay = self._backoff(failures)
                log.warning("%s: %s; retrying in %.1fs", resource.kind, exc, delay)
                await asyncio.sleep(delay)

    async def _listed_once(self, kind: str) -> None:
        if kind in self._listed:
            return
        self._listed.add(kind)
        if not self.stats.synced and self._required <= self._listed:
            marker = orjson.dumps({"epoch": self.epoch, "at": time.time()}).decode()
            await self.store.mark_synced(self.epoch, marker)
            self.stats.synced = True
            log.info("initial list of %s written: store synced", ", ".join(sorted(self._required)))

    def _upsert(self, resource: Resource, obj: dict[str, Any]) -> Op | None:
        """The object's write, or None (logged) when it cannot be converted.

        Any exception, not just the expected parse errors: one malformed object must cost only
        itself, never the watcher (a crash would relist everything, again and again).
        """
        try:
            return resource.upsert(obj)
        except (QuantityError, ValueError, TypeError, KeyError) as exc:
            log.warning("%s skipped: %s", _describe(resource.kind, obj), exc)
        except Exception:
            log.exception("%s skipped: unexpected error converting it", _describe(resource.kind, obj))
        return None

    def _delete(self, resource: Resource, obj: dict[str, Any]) -> Op | None:
        try:
            return resource.delete(obj)
        except Exception:
            log.exception("%s: delete skipped: malformed object", _describe(resource.kind, obj))
            return None

    def _identity(self, resource: Resource, obj: dict[str, Any]) -> str | None:
        try:
            return resource.identity(obj)
        except Exception:
            log.exception("%s skipped: no identity", _describe(resource.kind, obj))
            return None

    async def _relist(self, resource: Resource) -> str:
        """List everything and write only the difference; returns the list's resourceVersion."""
        stats = self.stats.of(resource.kind)
        started = time.perf_counter()
        listing = await self.kube.list(resource.path)
        stats.lists += 1
        listed: set[str] = set()
        ops: list[Op] = []
        for obj in listing.items:
            key = self._identity(resource, obj)
            if key is None:
                continue
            listed.add(key)
            op = self._upsert(resource, obj)
            if op is not None:
                ops.append(op)
        stored = await self.store.hash_keys(resource.stored_hash)
        if resource is PODS:
            stored |= await self.store.hash_keys("pending")
            ops.extend(Op.delete_pod_unless_assumed(uid) for uid in stored - listed)
        else:
            # A vanished object's last resourceVersion is unknown; the list's is at least as new.
            ops.extend(
                resource.delete({"metadata": self._identity_meta(resource, key, listing.resource_version)})
                for key in stored - listed
            )
        for start in range(0, len(ops), self.batch_size):
            raise_if_cancelling()
            await self._write(ops[start : start + self.batch_size])
        if resource is PODS:
            for uid in self._errored.keys() - listed:  # gone meanwhile
                del self._errored[uid]
            self._requeue_errored(listing.items)
        stats.resource_version = listing.resource_version
        log.info(
            "%s: listed %d, %d stored vanished, in %.2fs (rv %s)",
            resource.kind,
            len(listing.items),
            len(stored - listed),
            time.perf_counter() - started,
            listing.resource_version,
        )
        return listing.resource_version

    async def _write(self, ops: list[Op]) -> None:
        """Apply a batch; pods filter refused just before it landed are requeued in kube-scheduler
        when the batch freed capacity, changed a node or placed a pod (see extenders.kube.requeue)."""
        _, refused = await self.store.apply_and_take_refused(
            self.epoch, ops, REFUSAL_WINDOW_SECONDS, REQUEUE_INTERVAL_SECONDS
        )
        if refused:
            self._requeue(refused, "refused just before the snapshot caught up with a change")

    def _requeue(self, pods: list[PodRef], why: str) -> None:
        task = asyncio.create_task(self.requeuer.requeue(pods, why), name="requeue")
        self._requeues.add(task)
        task.add_done_callback(self._requeues.discard)

    def _requeue_errored(self, pods: Sequence[dict[str, Any]], gone: Sequence[dict[str, Any]] = ()) -> None:
        """Requeue pods whose last attempt ended on an error, at once for each new error; a repeat of
        the same error makes no new event (kube-scheduler leaves the condition as it is), so those are
        requeued again on a backoff (``_requeue_errored_again``). Both share a budget of
        ``ERROR_RETRY_PER_SECOND``: pods beyond it (a new leader's list, an outage failing many pods at
        once) are left to the backoff pass, due now, so a burst becomes at most that many writes a second."""
        due: list[PodRef] = []
        first = self.error_retry[0]
        now = time.monotonic()
        for obj in pods:
            try:
                uid, message = _pod_uid(obj), scheduling_error(obj)
                if message is None:
                    self._errored.pop(uid, None)
                    continue
                parked = self._errored.get(uid)
                if parked is None or parked.message != message:
                    ref = (uid, object_key(obj))
                    if self._error_budget.take():
                        self._errored[uid] = ParkedOnError(message, ref, now + first, first)
                        due.append(ref)
                    else:
                        self._errored[uid] = ParkedOnError(message, ref, now, first)
            except (KeyError, TypeError, ValueError):
                continue  # a malformed pod: its write already logged it
        for obj in gone:
            with contextlib.suppress(KeyError, TypeError, ValueError):
                self._errored.pop(_pod_uid(obj), None)
        if due:
            self._requeue(due, "its scheduling attempt failed on an error")

    async def _requeue_errored_again(self) -> None:
        """Requeue the pods still parked on the same error when their backoff is due."""
        first, longest = self.error_retry
        while True:
            await asyncio.sleep(min(first, 1.0))  # a pass a second (more often only in tests)
            now = time.monotonic()
            due: list[PodRef] = []
            for parked in self._errored.values():
                if parked.due <= now:
                    if not self._error_budget.take():
                        break
                    parked.interval = min(parked.interval * 2, longest)
                    parked.due = now + parked.interval
                    due.append(parked.ref)
            if due:
                self._requeue(due, "its scheduling attempt failed on the same error again")

    @staticmethod
    def _identity_meta(resource: Resource, key: str, rv: str) -> dict[str, str]:
        if resource is NODES or resource is NAMESPACES:
            return {"name": key, "resourceVersion": rv}
        namespace, _, name = key.partition("/")
        return {"namespace": namespace, "name": name, "resourceVersion": rv}

    async def _watch(self, resource: Resource, rv: str) -> str:
        """Apply events until the server ends the stream; returns the last resourceVersion written."""
        stats = self.stats.of(resource.kind)
        stats.watches += 1
        # Each event with the time it was read, so the write's lag behind the watch is measured.
        queue: asyncio.Queue[tuple[float, dict[str, Any]] | None] = asyncio.Queue(maxsize=10 * self.batch_size)

        async def read() -> None:
            try:
                async for event in self.kube.watch(resource.path, rv, self.watch_timeout):
                    await queue.put((time.perf_counter(), event))
            finally:
                with contextlib.suppress(asyncio.QueueFull):
                    queue.put_nowait(None)

        reader = asyncio.create_task(read(), name=f"watch-read-{resource.kind}")
        try:
            while True:
                raise_if_cancelling()
                if queue.empty() and reader.done():
                    break  # ended while the queue was full, so its end marker was dropped
                item = await queue.get()
                if item is None:
                    break
                oldest, event = item
                batch = [event]
                ended = False
                while len(batch) < self.batch_size and not queue.empty():
                    more = queue.get_nowait()
                    if more is None:
                        ended = True
                        break
                    batch.append(more[1])
                await self._apply_events(resource, batch)
                self.telemetry.watch_lag.labels(resource.kind).observe(time.perf_counter() - oldest)
                self.telemetry.watch_events.labels(resource.kind).inc(len(batch))
                if ended:
                    break
            await asyncio.wait([reader])
            reader.result()  # re-raises GoneError / connection errors from the stream
        finally:
            if not reader.done():
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await reader
        return stats.resource_version

    async def _apply_events(self, resource: Resource, events: list[dict[str, Any]]) -> None:
        stats = self.stats.of(resource.kind)
        ops: list[Op] = []
        upserted: list[dict[str, Any]] = []
        deleted: list[dict[str, Any]] = []
        rv = stats.resource_version
        for event in events:
            obj = event.get("object") if isinstance(event, dict) else None
            if not isinstance(obj, dict) or not isinstance(obj.get("metadata") or {}, dict):
                log.warning("%s: malformed watch event skipped: %.200r", resource.kind, event)
                continue
            kind = event.get("type")
            op: Op | None = None
            if kind in ("ADDED", "MODIFIED"):
                op = self._upsert(resource, obj)
                upserted.append(obj)
            elif kind == "DELETED":
                op = self._delete(resource, obj)
                deleted.append(obj)
            elif kind != "BOOKMARK":
                log.warning("%s: unexpected watch event type %r", resource.kind, kind)
            if op is not None:
                ops.append(op)
            rv = str(_meta(obj).get("resourceVersion") or rv)
        if ops:
            await self._write(ops)
        if resource is PODS:
            self._requeue_errored(upserted, deleted)
        stats.events += len(events)
        stats.batches += 1
        stats.resource_version = rv
