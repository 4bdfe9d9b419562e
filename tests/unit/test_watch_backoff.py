"""The watcher's retry delays: growing, capped, and jittered so replicas that lost the API server
together do not come back in step."""

from __future__ import annotations

import random
import statistics

from extenders.sync.reflector import Backoff


def watcher() -> Backoff:
    return Backoff(initial=0.2, longest=10.0)


def test_delays_grow_and_stay_within_half_and_all_of_the_capped_step() -> None:
    w = watcher()
    for failures in range(1, 16):
        step = min(10.0, 0.2 * 2 ** (failures - 1))
        for _ in range(50):
            assert step / 2 <= w.delay(failures) <= step


def test_delays_are_jittered_across_the_range() -> None:
    w = watcher()
    random.seed(7)
    delays = [w.delay(8) for _ in range(400)]  # a capped step: 10 s
    assert len({round(d, 3) for d in delays}) > 300, "not the same delay each time"
    assert min(delays) < 5.5 and max(delays) > 9.5, "the jitter spans the range"
    assert 7.0 < statistics.mean(delays) < 8.0
