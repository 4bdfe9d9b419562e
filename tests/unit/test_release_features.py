"""Following a kube-scheduler release: each behaviour difference between 1.28 and 1.37, on both sides
of the release that changed it (extenders.features).

Expectations are written out by hand from the releases' behaviour, not read from the production
constants, so a changed message or formula shows here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pydantic import ValidationError

from app.settings import Settings
from extenders import engine
from extenders.equivalence import EquivalenceCache, equivalence_class
from extenders.features import NEWEST, Features, VersionError, parse_version
from extenders.model import PodInfo
from extenders.plugins.framework import FIT, ScoringContext, Verdict
from extenders.plugins.image_locality import counted_images
from extenders.policy import default_policy
from extenders.snapshot import Snapshot
from extenders.sync.convert import pod_info
from tests.plugin_cases import make_node, make_pod, run_predicate
from tests.unit.plugins import node_facts
from tests.unit.plugins.node_resources.requests import node as resource_node
from tests.unit.plugins.node_resources.requests import pod as resource_pod
from tests.unit.plugins.scoring import run
from tests.unit.plugins.test_volume_restrictions import INCOMING, claiming, rwop_snapshot
from tests.unit.preemption import builders as preemption

MIB = 2**20


def release(value: object) -> str | None:
    """Test ids: a release by its name, other parameters as pytest names them."""
    return value.name if isinstance(value, Features) else None


# ---------------------------------------------------------------- versions
@pytest.mark.parametrize(
    ("text", "expected", "name"),
    [
        ("v1.28.7", Features(28, 7), "1.28.7"),
        ("1.30", Features(30), "1.30"),
        ("v1.29.4-eks-abc", Features(29, 4), "1.29.4"),
        ("v1.31.0-fake", Features(31, 0), "1.31.0"),
        ("v1.33.2+k3s1", Features(33, 2), "1.33.2"),
        (" 1.34.4\n", Features(34, 4), "1.34.4"),
        ("v1.37.2", Features(37, 2), "1.37.2"),
        # Older than the followed range: the oldest release, its first patch.
        ("1.20", Features(28, 0), "1.28.0"),
        ("v1.27.9", Features(28, 0), "1.28.0"),
        # Newer: the newest release, its latest patch.
        ("1.40", Features(37), "1.37"),
        ("v1.38.1", Features(37), "1.37"),
    ],
)
def test_parse_version(text: str, expected: Features, name: str) -> None:
    assert parse_version(text) == expected
    assert parse_version(text).name == name


@pytest.mark.parametrize("text", ["", "latest", "banana", "v2.0.1", "1", "v1", "1.x", "1.31.4.5", "v1.31.x", "11.31"])
def test_parse_version_rejects_what_names_no_release(text: str) -> None:
    with pytest.raises(VersionError, match=r"not a Kubernetes 1\.x version"):
        parse_version(text)
    assert issubclass(VersionError, ValueError)


def test_the_default_release_is_the_newest_latest_patch() -> None:
    assert NEWEST == Features() == Features(37) == parse_version("1.37")
    assert NEWEST.name == "1.37"
    assert Snapshot().features == NEWEST


def test_the_setting_takes_a_version_and_rejects_garbage() -> None:
    assert Settings(kube_version="v1.29.4-eks-abc").kube_version == "v1.29.4-eks-abc"
    assert Settings(kube_version="").kube_version is None  # empty: follow the API server
    assert Settings().kube_version is None
    with pytest.raises(ValidationError, match=r"not a Kubernetes 1\.x version"):
        Settings(kube_version="banana")


# ---------------------------------------------------------------- TaintToleration
NAMED = "node(s) had untolerated taint {dedicated: gpu}"
UNNAMED = "node(s) had untolerated taint(s)"


@pytest.mark.parametrize(
    ("features", "reason"),
    [
        (Features(28, 7), NAMED),
        (Features(33), NAMED),
        (Features(34, 0), NAMED),
        (Features(34, 1), NAMED),
        (Features(34, 2), UNNAMED),  # from 1.34.2 on
        (Features(34, 4), UNNAMED),
        (Features(34), UNNAMED),  # 1.34's latest patch
        (Features(35, 0), UNNAMED),
        (Features(36), UNNAMED),
        (Features(37, 2), UNNAMED),
    ],
    ids=release,
)
def test_taint_reason(features: Features, reason: str) -> None:
    tainted = make_node("n1", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    snapshot = Snapshot(nodes={"n1": tainted}, features=features)
    assert run_predicate("PodToleratesNodeTaints", make_pod(), tainted, snapshot) == Verdict(False, reason, True)
    # A tolerated taint fits under every release.
    tolerant = make_pod(spec={"tolerations": [{"key": "dedicated", "operator": "Exists"}]})
    assert run_predicate("PodToleratesNodeTaints", tolerant, tainted, snapshot) == FIT


# ---------------------------------------------------------------- VolumeRestrictions (ReadWriteOncePod)
RWOP_OLD = "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
RWOP_NEW = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"
)


@pytest.mark.parametrize(
    ("features", "reason"),
    [
        (Features(28, 7), RWOP_OLD),
        (Features(33, 9), RWOP_OLD),
        (Features(33), RWOP_OLD),
        (Features(34, 0), RWOP_NEW),
        (Features(34, 1), RWOP_NEW),
        (Features(34, 4), RWOP_NEW),
        (Features(36), RWOP_NEW),
        (Features(37, 2), RWOP_NEW),
    ],
    ids=release,
)
def test_read_write_once_pod_reason(features: Features, reason: str) -> None:
    snapshot = rwop_snapshot(claiming("user", "solo", node="n2"))
    snapshot.features = features
    verdict = Verdict(False, reason)  # resolvable under every release: preemption may evict the user
    assert {
        name: run_predicate("NoDiskConflict", INCOMING, info, snapshot) for name, info in snapshot.nodes.items()
    } == {
        "n1": verdict,
        "n2": verdict,
    }
    free = rwop_snapshot()
    free.features = features
    assert run_predicate("NoDiskConflict", INCOMING, free.nodes["n1"], free) == FIT


# ---------------------------------------------------------------- NodeResourcesBalancedAllocation
def _lopsided() -> Any:
    """cpu 3 of 4 used, memory 0 of 8Gi."""
    return resource_node("n1", {"cpu": "4", "memory": "8Gi"}, [resource_pod("e", {"cpu": "3"}, "n1")])


@pytest.mark.parametrize(
    ("features", "expected"),
    [
        # The node's balance as it is: fractions .75 and 0, std .375.
        (Features(28, 7), (1 - 0.375) * 10),
        (Features(32), (1 - 0.375) * 10),
        # Skipped from 1.33: 0 on every node.
        (Features(33, 0), 0.0),
        (Features(34, 1), 0.0),
        (Features(34, 4), 0.0),
        (Features(36), 0.0),
        (Features(37, 2), 0.0),
    ],
    ids=release,
)
def test_balanced_allocation_best_effort_pod(features: Features, expected: float) -> None:
    raw, normalized = run("BalancedResourceAllocation", resource_pod("in"), [_lopsided()], features=features)
    assert raw == normalized == {"n1": pytest.approx(expected)}


# A node with cpu 1 of 4 and memory 1Gi of 8Gi used: fractions .25 and .125, std .0625, balance 9.375.
# "evens": cpu 1, memory 3Gi -> .5 and .5, balance 10.
# "tilts": cpu 2, no memory -> .75 and .125, std .3125, balance 6.875.
# From 1.36: MAX/2 + (MAX/2 + with - without) / 2, MAX = 10.
EVENS_1_36 = 5 + (5 + 10 - 9.375) / 2  # 7.8125
TILTS_1_36 = 5 + (5 + 6.875 - 9.375) / 2  # 6.25


@pytest.mark.parametrize(
    ("features", "evens", "tilts"),
    [
        (Features(28, 7), 10.0, 6.875),
        (Features(34), 10.0, 6.875),
        (Features(34, 4), 10.0, 6.875),
        (Features(35), 10.0, 6.875),
        (Features(36, 0), EVENS_1_36, TILTS_1_36),
        (Features(36), EVENS_1_36, TILTS_1_36),
        (Features(37, 2), EVENS_1_36, TILTS_1_36),
    ],
    ids=release,
)
def test_balanced_allocation_scores_the_change_from_1_36(features: Features, evens: float, tilts: float) -> None:
    half_used = resource_node(
        "n1", {"cpu": "4", "memory": "8Gi"}, [resource_pod("e", {"cpu": "1", "memory": "1Gi"}, "n1")]
    )
    for incoming, expected in (
        (resource_pod("in", {"cpu": "1", "memory": "3Gi"}), evens),
        (resource_pod("in", {"cpu": "2"}), tilts),
    ):
        raw, normalized = run("BalancedResourceAllocation", incoming, [half_used], features=features)
        assert raw == normalized == {"n1": pytest.approx(expected)}


def test_balanced_allocation_change_keeps_the_order_of_nodes_for_a_pod_on_empty_nodes() -> None:
    """On empty nodes (balanced without the pod) the change is the balance with it, halved, plus a
    constant: the nodes rank alike under both formulas, in a range half as wide."""
    nodes = [resource_node(f"n{cpu}", {"cpu": str(cpu), "memory": "8Gi"}) for cpu in (2, 4, 16)]
    incoming = resource_pod("in", {"cpu": "1", "memory": "1Gi"})
    ctx = ScoringContext(resource_weights={"cpu": 1, "memory": 1})
    before, _ = run("BalancedResourceAllocation", incoming, nodes, ctx=ctx, features=Features(35))
    after, _ = run("BalancedResourceAllocation", incoming, nodes, ctx=ctx, features=Features(36))
    # n2: .5 and .125 -> std .1875 -> 8.125; n4: .25 and .125 -> 9.375; n16: .0625 and .125 -> 9.6875
    assert before == pytest.approx({"n2": 8.125, "n4": 9.375, "n16": 9.6875})
    assert after == pytest.approx({name: 5 + (5 + score - 10) / 2 for name, score in before.items()})
    assert sorted(before, key=before.__getitem__) == sorted(after, key=after.__getitem__)


# ---------------------------------------------------------------- ImageLocality
# Four nodes, each of the pod's images on one of them: a quarter of each size counts. n4 holds none.
IMAGE_NODES = {
    "n1": [(["init:v1"], 1600 * MIB)],  # 400 MiB
    "n2": [(["app:v1"], 800 * MIB)],  # 200 MiB
    "n3": [(["vol:v1"], 1200 * MIB)],  # 300 MiB
    "n4": [],
}
IMAGE_SPEC = {
    "initContainers": [{"name": "i", "image": "init:v1"}],
    "containers": [{"name": "c", "image": "app:v1"}],
    "volumes": [
        {"name": "scratch", "emptyDir": {}},
        {"name": "v", "image": {"reference": "vol:v1", "pullPolicy": "IfNotPresent"}},
    ],
}


def test_the_pod_records_which_images_are_init_containers_and_image_volumes() -> None:
    pod = node_facts.pod(IMAGE_SPEC)
    assert (pod.images, pod.init_images, pod.volume_images) == (["init:v1", "app:v1", "vol:v1"], 1, 1)
    two_inits = pod_info(
        {
            "metadata": {"name": "p", "namespace": "default", "uid": "u"},
            "spec": {
                "initContainers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}],
                "containers": [{"name": "c", "image": "c:1"}],
            },
        }
    )
    assert (two_inits.images, two_inits.init_images, two_inits.volume_images) == (["a:1", "b:1", "c:1"], 2, 0)


# Per release: the images summed, the image count the score range scales with, and the scores.
# The range is 23 MiB .. 1000 MiB per counted image, scaled to 0..100 in integers, shown as 0..10:
#   one image (977): app 100 * 177 // 977 = 18
#   two (1977): init 100 * 377 // 1977 = 19, app 100 * 177 // 1977 = 8, vol 100 * 277 // 1977 = 14
#   three (2977): init 37700 // 2977 = 12, app 17700 // 2977 = 5, vol 27700 // 2977 = 9
CONTAINERS_ONLY = (["app:v1"], 1, {"n1": 0.0, "n2": 1.8, "n3": 0.0})
WITH_INIT = (["init:v1", "app:v1"], 2, {"n1": 1.9, "n2": 0.8, "n3": 0.0})
VOLUMES_SUMMED = (["init:v1", "app:v1", "vol:v1"], 2, {"n1": 1.9, "n2": 0.8, "n3": 1.4})
VOLUMES_SCALED = (["init:v1", "app:v1", "vol:v1"], 3, {"n1": 1.2, "n2": 0.5, "n3": 0.9})


@pytest.mark.parametrize(
    ("features", "expected"),
    [
        (Features(28, 7), CONTAINERS_ONLY),
        (Features(29), CONTAINERS_ONLY),
        (Features(30, 0), WITH_INIT),  # init containers' images from 1.30
        (Features(34, 1), WITH_INIT),
        (Features(34, 4), WITH_INIT),
        (Features(35), WITH_INIT),
        (Features(36, 0), VOLUMES_SUMMED),  # image volumes summed from 1.36 ...
        (Features(36), VOLUMES_SUMMED),
        (Features(37, 0), VOLUMES_SCALED),  # ... and counted in the range from 1.37
        (Features(37, 2), VOLUMES_SCALED),
    ],
    ids=release,
)
def test_image_locality_images_by_release(
    features: Features, expected: tuple[list[str], int, dict[str, float]]
) -> None:
    summed, scale, scores = expected
    pod = node_facts.pod(IMAGE_SPEC)
    assert counted_images(pod, features) == (summed, scale)
    nodes = [node_facts.node(name, images=images) for name, images in IMAGE_NODES.items()]
    raw, normalized = run("ImageLocality", pod, nodes[:3], extra=nodes[3:], features=features)
    assert raw == normalized == scores


def test_image_locality_without_init_containers_or_image_volumes_is_the_same_under_every_release() -> None:
    pod = node_facts.pod({"containers": [{"name": "c", "image": "app:v1"}]})
    nodes = [node_facts.node(name, images=images) for name, images in IMAGE_NODES.items()]
    for features in (Features(28, 7), Features(34, 4), Features(36), Features(37, 2)):
        assert counted_images(pod, features) == (["app:v1"], 1)
        raw, _ = run("ImageLocality", pod, nodes[:3], extra=nodes[3:], features=features)
        assert raw == {"n1": 0.0, "n2": 1.8, "n3": 0.0}, features.name


# ---------------------------------------------------------------- preemption: victim order
def _victims(features: Features, full_pods: bool) -> dict[str, tuple[list[str], int]]:
    """n1's victims for a preemptor wanting both GPUs: the scheduler's ``s``, a PDB-guarded low-priority
    pod and an unguarded pod of higher priority (both hold a GPU, so neither can be reprieved)."""
    pods = [
        preemption.pod("s", "n1", prio=10),
        preemption.pod("guarded", "n1", prio=5, gpu=1, labels={"app": "db"}),
        preemption.pod("free", "n1", prio=50, gpu=1),
    ]
    snap = preemption.snapshot([preemption.node("n1", cpu="8", gpu=2)], pods, [preemption.pdb("db", {"app": "db"}, 0)])
    snap.features = features
    victim_pods = {"uid-s": pod_info(pods[0])} if full_pods else None
    result = preemption.process_preemption(
        preemption.POLICY,
        pod_info(preemption.pod("high", prio=1000, gpu=2)),
        {"n1": preemption.uids("s")},
        snap,
        victim_pods=victim_pods,
    )
    return preemption.names(result)


@pytest.mark.parametrize(
    ("features", "order"),
    [
        # Before 1.32: the PDB-violating victim first, then the others most important first.
        (Features(28, 7), ["guarded", "free", "s"]),
        (Features(31), ["guarded", "free", "s"]),
        # From 1.32: most important first, PDB or not.
        (Features(32, 0), ["free", "s", "guarded"]),
        (Features(34, 1), ["free", "s", "guarded"]),
        (Features(34, 4), ["free", "s", "guarded"]),
        (Features(36), ["free", "s", "guarded"]),
        (Features(37, 2), ["free", "s", "guarded"]),
    ],
    ids=release,
)
@pytest.mark.parametrize("full_pods", [False, True], ids=["meta-uids", "full-pods"])
def test_preemption_victim_order(features: Features, order: list[str], full_pods: bool) -> None:
    assert _victims(features, full_pods) == {"n1": (order, 1)}  # the same victims and violation count


# ---------------------------------------------------------------- equivalence classes
def _pod() -> PodInfo:
    return PodInfo(namespace="ns", name="web-1", uid="u1", requests={"cpu": 500}, images=["web:1"])


EVERY_RELEASE = [Features(minor, patch) for minor in range(28, 38) for patch in (0, 4, None)]


def test_how_the_release_behaves_is_part_of_the_equivalence_class() -> None:
    pod = _pod()
    classes = {equivalence_class(pod, features) for features in EVERY_RELEASE}
    # One class per distinct behaviour: releases that behave alike share one.
    assert len(classes) == len({features.behaviour for features in EVERY_RELEASE}) > 5
    assert equivalence_class(pod, Features(37)) == equivalence_class(pod, Features(37, 2))
    assert equivalence_class(pod, Features(34, 1)) != equivalence_class(pod, Features(34, 2))
    assert equivalence_class(pod, Features(28, 7)) != equivalence_class(pod, Features(34, 4))
    # Stable for equal releases, and across pods differing only in identity.
    assert equivalence_class(pod, Features(28, 7)) == equivalence_class(pod, Features(28, 7))
    twin = dataclasses.replace(pod, name="web-2", uid="u2")
    assert equivalence_class(twin, Features(34, 4)) == equivalence_class(pod, Features(34, 4))
    # Without one, the newest.
    assert equivalence_class(pod) == equivalence_class(pod, NEWEST) == equivalence_class(pod, Features(37))


def test_the_cache_keeps_one_memo_per_release_and_reuses_no_other_releases_verdict() -> None:
    cache = EquivalenceCache()
    pod = make_pod("web", requests={"cpu": "100m"})
    tainted = make_node("tainted", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}])
    nodes = {"tainted": tainted, "plain": make_node("plain")}
    old, new = (Snapshot(nodes=nodes, features=features) for features in (Features(28, 7), NEWEST))
    policy = default_policy()
    for _ in range(3):  # admitted on the second call, the verdicts stored and then reused
        memo = cache.memo(pod, "filter", features=old.features)
        assert memo is not None
        result = engine.filter_nodes(policy, pod, old, ["tainted", "plain"], memo)
        assert result.unresolvable == {"tainted": "node(s) had untolerated taint {k: v}"}
    assert result.reused >= 1
    memo = cache.memo(pod, "filter", features=new.features)
    assert memo is not None and memo.key == equivalence_class(pod, NEWEST) != equivalence_class(pod, old.features)
    result = engine.filter_nodes(policy, pod, new, ["tainted", "plain"], memo)
    assert result.unresolvable == {"tainted": "node(s) had untolerated taint(s)"}
    assert result.passing == ["plain"]
