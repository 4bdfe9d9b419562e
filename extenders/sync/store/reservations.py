"""Reservations any replica makes: a pod assumed on a node until the watch confirms it."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from extenders.model import PodInfo
from extenders.sync.records import reserved_pod
from extenders.sync.store.base import StoreBase, text


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


class Reservations(StoreBase):
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
        status = AssumeStatus(text(reply[0]))
        if status is AssumeStatus.ALREADY_BOUND:
            return AssumeResult(status, node=text(reply[1]))
        return AssumeResult(status, generation=int(reply[1]))

    async def forget_pod(self, uid: str, node: str | None = None) -> bool:
        """Drop an assumed pod (its bind failed); a pod the watch confirmed is left alone."""
        return bool(await self._run("forget", uid, node or ""))

    async def touch_assumed(self, uid: str, ttl: float) -> bool:
        """Renew an assumed pod's deadline; False when it is no longer assumed."""
        return bool(await self._run("touch_assumed", uid, int(ttl * 1000)))

    async def expire_assumed(self, limit: int = 1000) -> list[str]:
        """Remove assumed pods past their deadline (any replica may sweep); returns their uids."""
        return [text(u) for u in await self._run("expire", limit)]

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
