"""Gang bookkeeping follows the pods: the watch leader's reconciler.

Filter and bind write a gang's state only when one of its members asks, and a cancelled job asks
nothing: its pods are simply deleted. So the watch leader compares, every sweep interval, what the
bookkeeping knows (``GangStore.scan``) with the gangs of its latest snapshot, and hands the
differences to one Lua script (``gang_reconcile.lua``), which acts only where no member was seen
after that snapshot:

- a gang with no live member left (deleted, finished, relabelled away) vanishes: slot, queue place,
  arrivals and reservations go at once and the next queued gang is nudged;
- a gang not permitted with fewer live members than its minimum (or a minimum that can no longer be
  told: its PodGroup deleted) stands down: held members are released, slot and queue place given up;
- a changed minimum is written, and a gang whose held and placed members now reach it is permitted;
- an arrival whose pod left the gang (its labels changed while held at bind) is dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from redis.exceptions import RedisError

from extenders.aio import every
from extenders.gang.membership import GangIndex, GangIndexCache
from extenders.gang.state import GangBrief, GangStore
from extenders.logs import FailureLog
from extenders.snapshot import Snapshot

log = logging.getLogger(__name__)

# A member filtered before the watch had written it keeps its gang out of reach until the
# reconciler's snapshot has the pod (or its deletion), or for this long at most.
UNSEEN_GRACE_SECONDS = 5.0
# A member filtered on a snapshot newer than the reconciler's keeps its gang out of reach until the
# reconciler's snapshot catches up, or for this long at most (a generation from an older store).
ASKED_HORIZON_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class Action:
    """What the snapshot says of one gang the bookkeeping knows, for ``gang_reconcile.lua``."""

    gang: str
    live: int
    minimum: int | None  # None: it cannot be told (no PodGroup, no label)
    placed: tuple[str, ...] = ()  # live members bound or reserved
    stray: tuple[str, ...] = ()  # arrivals whose pod is no longer a live member
    why: str = ""  # why it stands down, when it does

    def wire(self) -> dict[str, Any]:
        return {
            "g": self.gang,
            "live": self.live,
            "min": -1 if self.minimum is None else self.minimum,
            "placed": list(self.placed),
            "stray": list(self.stray),
            "why": self.why,
        }


def plan(briefs: Iterable[GangBrief], index: GangIndex) -> list[Action]:
    """The actions that make ``briefs`` agree with ``index``'s snapshot (none for a gang that does)."""
    actions: list[Action] = []
    for brief in briefs:
        members = index.members(brief.key)
        if members.count == 0:
            actions.append(Action(brief.key, 0, brief.minimum))
            continue
        if brief.state == "permitted":
            continue  # decided: every arrival binds, whatever happens to the others
        ref = index.ref(brief.key)
        minimum = ref.min_member if ref is not None else None
        uids = {p.uid for p in members.all()}
        stray = tuple(u for u in brief.arrivals if u not in uids)
        short = minimum is None or members.count < minimum
        holds = bool(brief.arrivals) or brief.admitted or brief.queued
        if short and not holds and not stray:
            continue
        if not short and minimum == brief.minimum and not stray:
            continue
        if minimum is None:
            detail = ref.error if ref is not None and ref.error else "its minimum cannot be told"
        else:
            detail = f"only {members.count} of the {minimum} required members exist"
        actions.append(
            Action(
                brief.key,
                members.count,
                minimum,
                tuple(members.placed_uids()),
                stray,
                f"gang {brief.key} stood down: {detail}" if short else "",
            )
        )
    return actions


class GangReconciler:
    """The watch leader's loop over ``plan``; one Redis read and at most one script call a pass."""

    def __init__(
        self,
        store: GangStore,
        snapshot: Callable[[], Awaitable[Snapshot]],
        index: GangIndexCache,
        interval: float,
        *,
        unseen_grace: float = UNSEEN_GRACE_SECONDS,
        asked_horizon: float = ASKED_HORIZON_SECONDS,
    ) -> None:
        self.store = store
        self.snapshot = snapshot
        self.index = index
        self.interval = interval
        self.unseen_grace = unseen_grace
        self.asked_horizon = asked_horizon

    async def run(self) -> None:
        await every(self.interval, self.reconcile, FailureLog(log, "gang reconcile"), (RedisError, OSError))

    async def reconcile(self) -> dict[str, str]:
        """One pass: ``{gang: outcome}`` of every gang acted on (see ``gang_reconcile.lua``)."""
        briefs = await self.store.scan()
        if not briefs:
            return {}  # no gang known: no snapshot to read, no index to build
        snapshot = await self.snapshot()
        actions = plan(briefs, self.index.get(snapshot))
        outcomes = await self.store.reconcile(
            snapshot.generation,
            [a.wire() for a in actions],
            grace_seconds=self.unseen_grace,
            horizon_seconds=self.asked_horizon,
        )
        for action in actions:
            outcome = outcomes.get(action.gang, "")
            if outcome == "vanished":
                log.info("gang %s has no live member left: its bookkeeping was dropped", action.gang)
            elif outcome == "released":
                log.info("%s: its held members, slot and queue place were released", action.why)
            elif outcome == "permitted":
                log.info("gang %s: its minimum is now %s and is met: permitted", action.gang, action.minimum)
        return outcomes
