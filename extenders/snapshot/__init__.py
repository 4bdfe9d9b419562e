"""The in-memory picture of the cluster a replica schedules against.

Each replica holds one ``Snapshot`` and refreshes it from Redis before answering (see
``extenders.sync.cache``); the engine only ever reads it. ``generation`` is the cluster generation
it reflects.
"""

from extenders.snapshot.nominated import NominatedPods, index_nominated, patch_nominated
from extenders.snapshot.snapshot import Snapshot

__all__ = ["NominatedPods", "Snapshot", "index_nominated", "patch_nominated"]
