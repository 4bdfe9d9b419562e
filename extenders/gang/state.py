"""Typed access to the gang bookkeeping in Redis; every decision is one Lua script.

The scripts (``extenders/lua/gang_*.lua``) run with the snapshot's prelude, so reserving a
member's node, recording its arrival and deciding the quorum happen in one atomic step, and
dropping a dead replica's arrivals releases their reservations in the same step.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import redis.asyncio as aredis
from redis.commands.core import AsyncScript

from extenders import lua
from extenders.gang.config import GangConfig
from extenders.kube.requeue import PodRef
from extenders.model import PodInfo
from extenders.sync.records import reserved_pod

_SCRIPTS = (
    "gang_filter",
    "gang_arrive",
    "gang_poll",
    "gang_done",
    "gang_sweep",
    "gang_read",
    "gang_nudge",
    "gang_orphan",
    "gang_scan",
    "gang_reconcile",
)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


# A gang member as filter parks it: (uid, namespace/name), what extenders.kube.requeue takes.
Member = PodRef
NO_MEMBER: Member = ("", "")
# What a filter saw: the generation of its snapshot, and whether the member was in it. The reconciler
# leaves alone a gang whose members may be newer than its own snapshot.
Seen = tuple[int, bool]
NO_VIEW: Seen = (0, True)  # a caller that says nothing of its snapshot holds the reconciler back not at all


class FilterStatus(enum.Enum):
    COOLING = "cooling"
    PERMITTED = "permitted"
    UNREADY = "unready"
    ADMITTED = "admitted"
    QUEUED = "queued"
    CHECK = "check"  # not admitted: the caller's capacity check decides (see GangStore.check)
    PARKED = "parked"


@dataclass(slots=True, frozen=True)
class FilterState:
    status: FilterStatus
    why: str = ""
    ms_left: int = -1  # cool-down (COOLING) or window (ADMITTED) left; -1 when none
    held: int = 0
    position: int = 0
    assembling: tuple[str, ...] = ()


class ArriveStatus(enum.Enum):
    REJECTED = "rejected"  # cooling down after a rejection
    NOT_ADMITTED = "notadmitted"
    CONFLICT = "conflict"  # the node changed since the fit check: validate again
    BOUND = "bound"  # the watch already shows the pod bound (to ``node``)
    PERMITTED = "permitted"
    WAIT = "wait"


@dataclass(slots=True, frozen=True)
class ArriveResult:
    status: ArriveStatus
    why: str = ""
    ms_left: int = 0
    held: int = 0
    bound: int = 0
    position: int = 0
    assembling: tuple[str, ...] = ()
    node: str = ""
    generation: int = 0
    replaced: str = ""  # PERMITTED, WAIT: another call's arrival for the pod this one replaced


@dataclass(slots=True, frozen=True)
class PollResult:
    state: str  # '' (assembling or nothing yet) | 'permitted' | 'rejected'
    why: str
    window_ms: int
    cool_ms: int
    mine: list[bool]


@dataclass(slots=True, frozen=True)
class GangBrief:
    """A gang as the bookkeeping has it, reduced to what the reconciler compares with the pods."""

    key: str
    minimum: int | None
    state: str  # '' | 'permitted' | 'rejected'
    admitted: bool
    queued: bool
    arrivals: tuple[str, ...]  # uids of the arrivals recorded at bind (held, binding or bound)


@dataclass(slots=True)
class GangRecord:
    """One gang's raw bookkeeping, as the status API reads it."""

    key: str
    fields: dict[str, str] = field(default_factory=dict)
    arrivals: dict[str, dict[str, Any]] = field(default_factory=dict)
    admitted: bool = False
    queue_position: int = -1


def _flat(values: Sequence[Any]) -> dict[str, str]:
    return {_text(values[i]): _text(values[i + 1]) for i in range(0, len(values), 2)}


def _csv(value: Any) -> tuple[str, ...]:
    text = _text(value)
    return tuple(t for t in text.split(",") if t)


class GangStore:
    def __init__(self, redis: aredis.Redis, prefix: str, config: GangConfig) -> None:
        self.redis = redis
        self.prefix = prefix
        self.config = config
        self._scripts: dict[str, AsyncScript] = lua.register(redis, _SCRIPTS, head=("prelude", "gang_common"))

    @property
    def channel(self) -> str:
        """The pub/sub channel carrying the key of every gang whose state changed."""
        return f"{self.prefix}:gangev"

    @property
    def nudge_channel(self) -> str:
        """The pub/sub channel saying that a nudge of parked members is due now."""
        return f"{self.prefix}:gangnudgeev"

    async def _run(self, name: str, *args: Any) -> Any:
        c = self.config
        cooldown = f"{_ms(c.cooldown_seconds)}:{_ms(c.cooldown_max_seconds)}"
        return await self._scripts[name](args=[self.prefix, cooldown, *args])

    async def check(self, gang: str, member: Member = NO_MEMBER, seen: Seen = NO_VIEW) -> FilterState:
        """The gang's state for a member's filter: COOLING, PERMITTED or ADMITTED decide; CHECK
        means the gang is not admitted and ``filter`` must follow with the caller's verdict."""
        return await self._filter("state", gang, member, 0, 0, seen)

    async def filter(
        self,
        gang: str,
        ready: bool,
        score: int,
        minimum: int,
        member: Member = NO_MEMBER,
        seen: Seen = NO_VIEW,
        priority: int = 0,
    ) -> FilterState:
        """Admit the gang (``ready``: the member count and capacity suffice) or turn the member away;
        a member turned away is parked, to be nudged when its gang may go on. ``score`` and
        ``priority`` place it in the admission queue (higher priority first, then lower score)."""
        phase = "ready" if ready else "unready"
        return await self._filter(phase, gang, member, score, minimum, seen, priority)

    async def release_orphan(self, gang: str, uid: str) -> bool:
        """Drop a member's held arrival and reservation that no live bind call stands behind."""
        return bool(int(await self._run("gang_orphan", gang, uid)))

    async def park(self, gang: str, member: Member, seen: Seen = NO_VIEW) -> None:
        """Park a member that failed filter on every node for a reason of its own."""
        await self._filter("park", gang, member, 0, 0, seen)

    async def _filter(
        self, phase: str, gang: str, member: Member, score: int, minimum: int, seen: Seen, priority: int = 0
    ) -> FilterState:
        c = self.config
        uid, ref = member
        generation, in_snapshot = seen
        reply = await self._run(
            "gang_filter",
            gang,
            phase,
            uid,
            ref,
            score,
            c.max_assembling,
            _ms(c.queue_idle_seconds),
            minimum,
            generation,
            "0" if in_snapshot else "1",
            priority,
        )
        status = FilterStatus(_text(reply[0]))
        if status is FilterStatus.COOLING:
            return FilterState(status, why=_text(reply[1]), ms_left=int(reply[2]))
        if status is FilterStatus.ADMITTED:
            return FilterState(status, held=int(reply[1]), ms_left=int(reply[2]))
        if status is FilterStatus.QUEUED:
            return FilterState(status, position=int(reply[1]), assembling=_csv(reply[2]))
        return FilterState(status)

    async def arrive(
        self,
        gang: str,
        pod: PodInfo,
        node: str,
        expected_generation: int | None,
        *,
        token: str,
        replica: str,
        window_seconds: float,
        minimum: int,
        score: int,
        priority: int = 0,
        placed_uids: Sequence[str] = (),
    ) -> ArriveResult:
        """Reserve and record a member's arrival; ``placed_uids``: the gang's live (not terminating)
        members the caller's snapshot shows bound or held (those still placed in Redis count toward
        the quorum; bound arrivals of earlier calls count only through this list)."""
        c = self.config
        info = orjson.dumps({"pod": pod.name, "node": node, "replica": replica, "t": token, "st": "w"})
        reply = await self._run(
            "gang_arrive",
            gang,
            pod.uid,
            node,
            reserved_pod(pod, node),
            "" if expected_generation is None else str(int(expected_generation)),
            _ms(c.hold_ttl_seconds),
            info,
            _ms(c.arrival_lease_seconds),
            _ms(window_seconds),
            minimum,
            score,
            c.max_assembling,
            _ms(c.queue_idle_seconds),
            _ms(c.assumed_ttl_seconds),
            priority,
            *placed_uids,
        )
        status = ArriveStatus(_text(reply[0]))
        if status is ArriveStatus.REJECTED:
            return ArriveResult(status, why=_text(reply[1]), ms_left=int(reply[2]))
        if status is ArriveStatus.NOT_ADMITTED:
            return ArriveResult(status, position=int(reply[1]), assembling=_csv(reply[2]))
        if status is ArriveStatus.CONFLICT:
            return ArriveResult(status, generation=int(reply[1]))
        if status is ArriveStatus.BOUND:
            return ArriveResult(status, node=_text(reply[1]))
        if status is ArriveStatus.PERMITTED:
            return ArriveResult(status, held=int(reply[1]), bound=int(reply[2]), replaced=_text(reply[3]))
        return ArriveResult(
            status, ms_left=int(reply[1]), held=int(reply[2]), bound=int(reply[3]), replaced=_text(reply[4])
        )

    async def poll(self, gang: str, held: Sequence[tuple[str, str]]) -> PollResult:
        c = self.config
        args: list[Any] = [gang, _ms(c.arrival_lease_seconds), _ms(c.hold_ttl_seconds)]
        for uid, token in held:
            args.extend((uid, token))
        reply = await self._run("gang_poll", *args)
        return PollResult(
            state=_text(reply[0]),
            why=_text(reply[1]),
            window_ms=int(reply[2]),
            cool_ms=int(reply[3]),
            mine=[bool(int(x)) for x in reply[4:]],
        )

    async def done(self, gang: str, uid: str, token: str, bound: bool) -> bool:
        """End a held call: mark it bound, or withdraw it and release its reservation."""
        return (await self.done_many(gang, [(uid, token, bound)]))[0]

    async def withdraw(self, gang: str, uid: str, token: str) -> bool:
        """Take back a held arrival whose caller went away; False when the gang is already
        permitted (the arrival stays, and the pod must be bound for all-or-nothing)."""
        args: list[Any] = [gang, _ms(self.config.assumed_ttl_seconds), uid, token, "withdraw"]
        return int((await self._run("gang_done", *args))[0]) != 2

    async def done_many(self, gang: str, calls: Sequence[tuple[str, str, bool]]) -> list[bool]:
        """``done`` for several calls of one gang in one script call."""
        args: list[Any] = [gang, _ms(self.config.assumed_ttl_seconds)]
        for uid, token, bound in calls:
            args.extend((uid, token, "bound" if bound else "failed"))
        return [bool(int(x)) for x in await self._run("gang_done", *args)]

    async def sweep(self, limit: int = 1000) -> list[str]:
        """Upkeep of every gang; returns the idle gangs deleted."""
        c = self.config
        reply = await self._run("gang_sweep", _ms(c.idle_seconds), limit, c.max_assembling, _ms(c.queue_idle_seconds))
        return [_text(g) for g in reply]

    async def scan(self) -> list[GangBrief]:
        """Every gang the bookkeeping knows, as the reconciler compares it with a snapshot."""
        return [
            GangBrief(
                _text(item[0]),
                int(_text(item[1])) if _text(item[1]) else None,
                _text(item[2]),
                bool(int(item[3])),
                bool(int(item[4])),
                tuple(_text(u) for u in item[5:]),
            )
            for item in await self._run("gang_scan")
        ]

    async def reconcile(
        self, generation: int, actions: Sequence[dict[str, Any]], *, grace_seconds: float, horizon_seconds: float
    ) -> dict[str, str]:
        """Apply the reconciler's actions (see gang_reconcile.lua); ``{gang: outcome}``."""
        if not actions:
            return {}
        reply = await self._run(
            "gang_reconcile",
            generation,
            _ms(grace_seconds),
            _ms(horizon_seconds),
            _ms(self.config.assumed_ttl_seconds),
            orjson.dumps(list(actions)),
        )
        return {_text(reply[i]): _text(reply[i + 1]) for i in range(0, len(reply), 2)}

    async def take_nudges(self, limit: int = 100) -> list[tuple[str, list[Member]]]:
        """The due nudges, each handed to one caller only: ``[(gang, [(uid, namespace/name)])]``."""
        out: list[tuple[str, list[Member]]] = []
        for gang, flat in await self._run("gang_nudge", limit):
            parked = _flat(flat)
            out.append((_text(gang), sorted(parked.items(), key=lambda kv: kv[1])))
        return out

    async def read(self, gangs: Sequence[str] | None = None) -> tuple[int, list[GangRecord]]:
        """Redis's clock (ms) and the bookkeeping of ``gangs`` (every known gang when None)."""
        if gangs is not None and not gangs:
            return 0, []
        reply = await self._run("gang_read", *(gangs if gangs is not None else [""]))
        now = int(reply[0])
        records: list[GangRecord] = []
        for item in reply[1:]:
            arrivals = {k: orjson.loads(v) for k, v in _flat(item[2]).items()}
            records.append(GangRecord(_text(item[0]), _flat(item[1]), arrivals, bool(int(item[3])), int(item[4])))
        return now, records
