"""Tests of the fake kube-apiserver's watches: initial state, resuming, selectors, bookmarks, watch-list,
compaction and the history bound, as kube-apiserver serves them."""

from __future__ import annotations

import time

import pytest

from tests.fake_kube.builders import (
    make_pod,
    make_podgroup,
)
from tests.fake_kube.errors import ApiError
from tests.fake_kube.resources import PODS
from tests.fake_kube.selectors import label_matcher
from tests.fake_kube.store import Store
from tests.fake_kube_tests.support import next_event, rv
from tests.plugins.fake_kube import FakeKube

pytestmark = pytest.mark.integration


# -- watch ----------------------------------------------------------------------------------------------


def test_watch_initial_state_then_live_events(kube: FakeKube) -> None:
    c = kube.client
    c.create(make_pod("existing", namespace="w1"))
    with c.watch("Pod", "w1") as stream:
        added = next_event(stream)
        assert added["type"] == "ADDED" and added["object"]["metadata"]["name"] == "existing"
        assert added["object"]["kind"] == "Pod"  # watch objects carry their TypeMeta
        created = c.create(make_pod("new", namespace="w1"), with_status=False)
        c.patch("Pod", "new", {"metadata": {"labels": {"a": "b"}}}, namespace="w1")
        c.delete("Pod", "new", "w1")
        c.create(make_pod("elsewhere", namespace="w1-other"))  # another namespace: not seen
        events = [next_event(stream) for _ in range(3)]
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    rvs = [rv(e["object"]) for e in events]
    assert rvs == sorted(rvs) and rvs[0] == rv(created) and len(set(rvs)) == 3


def test_watch_resumes_from_resource_version_and_applies_selectors(kube: FakeKube) -> None:
    c = kube.client
    start = c.list("Pod", "w2")["metadata"]["resourceVersion"]
    c.create(make_pod("a", namespace="w2", labels={"team": "x"}), with_status=False)
    c.create(make_pod("b", namespace="w2", labels={"team": "y"}), with_status=False)
    with c.watch("Pod", "w2", resourceVersion=start, labelSelector="team=x") as stream:
        replayed = next_event(stream)
        assert (replayed["type"], replayed["object"]["metadata"]["name"]) == ("ADDED", "a")
        c.patch("Pod", "a", {"metadata": {"labels": {"team": "y"}}}, namespace="w2")  # leaves the selection
        c.patch("Pod", "b", {"metadata": {"labels": {"team": "x"}}}, namespace="w2")  # enters it
        left, entered = next_event(stream), next_event(stream)
    assert (left["type"], left["object"]["metadata"]["name"]) == ("DELETED", "a")
    assert (entered["type"], entered["object"]["metadata"]["name"]) == ("ADDED", "b")


def test_bookmarks_only_when_allowed_and_timeout_closes(kube: FakeKube) -> None:
    c = kube.client
    c.create(make_pod("bm", namespace="w3"), with_status=False)
    now = c.list("Pod", "w3")["metadata"]["resourceVersion"]
    with c.watch("Pod", "w3", resourceVersion=now, allowWatchBookmarks=True, timeoutSeconds=2) as stream:
        bookmark = stream.next()
    assert bookmark is not None and bookmark["type"] == "BOOKMARK"
    assert bookmark["object"]["kind"] == "Pod" and bookmark["object"]["apiVersion"] == "v1"
    assert int(bookmark["object"]["metadata"]["resourceVersion"]) >= int(now)
    began = time.monotonic()
    with c.watch("Pod", "w3", resourceVersion=now, timeoutSeconds=1) as stream:
        assert stream.next() is None  # no bookmarks without allowWatchBookmarks; closed at the timeout
    assert 0.8 < time.monotonic() - began < 3


def test_watch_list_send_initial_events(kube: FakeKube) -> None:
    c = kube.client
    c.create(make_podgroup("g1", namespace="w4"))
    params = {"sendInitialEvents": True, "allowWatchBookmarks": True, "resourceVersionMatch": "NotOlderThan"}
    with c.watch("PodGroup", "w4", **params) as stream:
        first, marker = stream.next(), stream.next()
    assert first is not None and first["type"] == "ADDED" and first["object"]["kind"] == "PodGroup"
    assert marker is not None and marker["type"] == "BOOKMARK"
    assert marker["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_compaction_gives_410_expired_and_break_closes_watches(kube: FakeKube) -> None:
    c = kube.client
    old = c.create(make_pod("c1", namespace="w5"), with_status=False)
    c.patch("Pod", "c1", {"metadata": {"labels": {"v": "2"}}}, namespace="w5")
    compacted = kube.compact()
    kube.client.reset_stats()
    with c.watch("Pod", "w5", resourceVersion=rv(old)) as stream:
        error = stream.next()
        assert stream.next() is None  # then the server closes the stream
    assert error is not None and error["type"] == "ERROR"
    status = error["object"]
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")
    assert status["message"] == f"too old resource version: {rv(old)} ({compacted})"

    with c.watch("Pod", "w5", resourceVersion=str(compacted)) as stream:
        kube.wait_for_watches("pods", 1)
        assert kube.break_watches() >= 1
        assert stream.next() is None
    stats = kube.stats()
    assert stats["requests"]["watch"]["pods"] == 2
    deadline = time.monotonic() + 5
    while kube.stats()["openWatches"]["pods"] and time.monotonic() < deadline:
        time.sleep(0.02)
    assert kube.stats()["openWatches"]["pods"] == 0


def test_history_bound_expires_old_resource_versions() -> None:
    store = Store(history_limit=2)
    first = store.create(PODS, "ns", {"metadata": {"name": "a"}, "spec": {"containers": []}})
    for name in ("b", "c"):
        store.create(PODS, "ns", {"metadata": {"name": name}, "spec": {"containers": []}})
    with pytest.raises(ApiError, match=r"too old resource version: 0 \(1\)") as exc:
        store.subscribe(PODS, None, label_matcher(""), "0", initial=False)
    assert exc.value.code == 410 and exc.value.body["reason"] == "Expired"
    events, _ = store.subscribe(PODS, None, label_matcher(""), str(rv(first)), initial=False)
    assert [e[1]["metadata"]["name"] for e in events] == ["b", "c"]
