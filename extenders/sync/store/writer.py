"""The watcher's fenced writes, and the few writes any replica makes to the snapshot itself."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from redis.exceptions import ResponseError

from extenders.model import NodeFacts, PodInfo
from extenders.sync.ops import Op
from extenders.sync.records import NODE
from extenders.sync.store.base import FencedError, StoreBase, text


class SnapshotWriter(StoreBase):
    async def apply(self, epoch: int, ops: Iterable[Op]) -> int:
        """Apply a batch atomically as the leader of term ``epoch``; returns the cluster generation.

        Raises FencedError (and writes nothing) when another term has started since.
        """
        return (await self.apply_and_take_refused(epoch, ops))[0]

    async def apply_and_take_refused(
        self, epoch: int, ops: Iterable[Op], window: float | None = None, interval: float = 10.0
    ) -> tuple[int, list[tuple[str, str]]]:
        """``apply``; with ``window`` (seconds), also the pods filter refused within it, when this
        batch freed capacity, changed a node's facts or placed a pod (each refusal once; the requeue
        times are kept ``interval`` for ``record_refusal``): ``(generation, [(uid, namespace/name)])``."""
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
        return int(reply[0]), [(text(reply[i]), text(reply[i + 1])) for i in range(1, len(reply), 2)]

    async def record_refusal(self, uid: str, ref: str, generation: int, keep: float, interval: float = 10.0) -> bool:
        """Filter refused ``ref`` on every node, on the snapshot of ``generation``. True: a change
        kube-scheduler may already have retried the pod on landed after that snapshot, so requeue it
        now (unless it was requeued within ``interval`` and since that change); else the refusal is
        kept ``keep`` seconds for the watcher's writes to hand back (see ``apply_and_take_refused``)."""
        reply = await self._run("refuse", uid, ref, int(keep * 1000), generation, int(interval * 1000))
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

    async def refresh_node_if_newer(self, facts: NodeFacts) -> bool:
        """Store node facts seen in a request if their resourceVersion is newer and they differ."""
        return bool(await self._run("refresh_node", facts.name, facts.resource_version, NODE.dumps(facts)))

    async def compact(self, upto_generation: int) -> int:
        """Drop tombstones up to a generation; returns the floor (replicas older than it reload)."""
        return int(await self._run("compact", int(upto_generation)))
