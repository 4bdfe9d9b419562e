"""The cache's bounds and counters: a cap on classes (least recently used go), a TTL, and stats."""

from __future__ import annotations

from extenders.equivalence import CacheConfig, EquivalenceCache
from extenders.model import PodInfo


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def pod(app: str) -> PodInfo:
    return PodInfo(namespace="ns", name=f"{app}-1", uid=f"{app}-uid", labels={"app": app})


def test_the_least_recently_used_class_goes_first_when_over_the_cap() -> None:
    cache = EquivalenceCache(CacheConfig(max_classes=2), clock=Clock())
    a, b, c = cache.memo(pod("a")), cache.memo(pod("b")), None
    assert a is not None and b is not None
    assert cache.memo(pod("a")) is a  # a is now the most recent
    c = cache.memo(pod("c"))
    assert cache.classes == 2 and cache.evictions == 1
    assert cache.memo(pod("a")) is a and cache.memo(pod("c")) is c
    assert cache.memo(pod("b")) is not b  # b was evicted and starts afresh


def test_classes_unused_for_the_ttl_expire() -> None:
    clock = Clock()
    cache = EquivalenceCache(CacheConfig(ttl_seconds=10), clock=clock)
    old = cache.memo(pod("a"))
    clock.now = 5
    kept = cache.memo(pod("b"))
    clock.now = 12
    assert cache.memo(pod("b")) is kept
    assert cache.classes == 1 and cache.evictions == 1
    assert cache.memo(pod("a")) is not old


def test_a_class_is_admitted_on_its_second_sighting() -> None:
    cache = EquivalenceCache()
    first = cache.memo(pod("a"))
    assert first is not None and not first.admitted
    again = cache.memo(pod("a"))
    assert again is first and again.admitted


def test_off_means_no_memo_and_stats_count_requests_by_reuse() -> None:
    assert EquivalenceCache(CacheConfig(enabled=False)).memo(pod("a")) is None
    cache = EquivalenceCache()
    cache.count("filter", reused=0, computed=5)
    cache.count("filter", reused=3, computed=2)
    cache.count("filter", reused=5, computed=0)
    cache.count("filter", reused=4, computed=0, recalled=True)
    doc = cache.document()
    assert doc["enabled"] is True
    assert doc["verbs"]["filter"] == {
        "recalled": 1,
        "hits": 1,
        "partial": 1,
        "misses": 1,
        "nodes_reused": 12,
        "nodes_computed": 7,
        "nodes_shared": 0,
    }


def test_the_entry_cap_drops_the_least_recently_used_classes() -> None:
    cache = EquivalenceCache(CacheConfig(max_entries=25))
    memos = {}
    for name in ("a", "b", "c"):
        memo = cache.memo(pod(name))
        assert memo is not None
        memo.filter.update({f"n{i}": ((), 0, -1, None) for i in range(10)})
        cache.count("filter", reused=0, computed=10)
        memos[name] = memo
    # 30 entries after the third class: the oldest (a) goes, b and c (20) fit
    assert cache.classes == 2 and cache.entries() == 20 and cache.evictions == 1
    assert cache.memo(pod("a")) is not memos["a"]
    assert cache.memo(pod("c")) is memos["c"]
    alone = cache.memo(pod("d"))
    assert alone is not None
    alone.scores["LeastRequested"] = {f"n{i}": ((), (1.0,)) for i in range(40)}
    cache.count("prioritize", reused=0, computed=40)
    # over the cap by itself: every other class goes, the one in use stays
    assert cache.classes == 1 and cache.memo(pod("d")) is alone
    assert cache.document()["max_entries"] == 25
