"""Gang membership from labels, PodGroups and annotations; the member index; the capacity check."""

from __future__ import annotations

import pytest

from extenders.gang.config import GangConfig, parse_label_pairs
from extenders.gang.filter import capacity_shortfall, keeps_nomination, needed_requests
from extenders.gang.membership import GangIndex, gang_key, gang_of, gang_of_for, gang_ref
from extenders.model import NodeInfo, PodGroupInfo, PodInfo
from extenders.snapshot import Snapshot
from extenders.sync.convert import node_facts, pod_info
from tests.fake_kube.builders import make_pod
from tests.gang_support import GPU, gpu_node, member


def pod(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None, ns: str = "team") -> PodInfo:
    return pod_info(make_pod("p", namespace=ns, labels=labels, annotations=annotations))


def test_scheduler_plugins_label_takes_min_from_the_podgroup_first() -> None:
    p = pod({"scheduling.x-k8s.io/pod-group": "train"}, {"scheduling.x-k8s.io/min-available": "3"})
    groups = {"team/train": PodGroupInfo("team", "train", 5, "2024-01-01T00:00:00Z", 40)}
    ref = gang_ref(p, groups)
    assert ref is not None and (ref.key, ref.min_member, ref.window_seconds) == ("team/train", 5, 40.0)
    assert gang_of(p, groups) == ("team/train", 5)
    assert gang_of(p) == ("team/train", 3)  # no PodGroup: the annotation


def test_scheduler_plugins_label_without_any_minimum_is_a_gang_with_an_error() -> None:
    ref = gang_ref(pod({"scheduling.x-k8s.io/pod-group": "train"}))
    assert ref is not None and ref.min_member is None and ref.is_gang
    assert "no PodGroup team/train" in ref.error and "scheduling.x-k8s.io/min-available" in ref.error
    assert gang_of(pod({"scheduling.x-k8s.io/pod-group": "train"})) is None


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"pod-group.scheduling.sigs.k8s.io/name": "g", "pod-group.scheduling.sigs.k8s.io/min-available": "4"}, 4),
        ({"gang.unicore.mcyou.cn/name": "g", "gang.unicore.mcyou.cn/available-count": "6"}, 6),
    ],
)
def test_older_and_unicore_label_pairs(labels: dict[str, str], expected: int) -> None:
    assert gang_of(pod(labels)) == ("team/g", expected)


def test_bad_minimum_and_gangs_of_one() -> None:
    bad = gang_ref(pod({"gang.unicore.mcyou.cn/name": "g", "gang.unicore.mcyou.cn/available-count": "x"}))
    assert bad is not None and bad.min_member is None and "'x' is not a positive integer" in bad.error
    one = gang_ref(pod({"gang.unicore.mcyou.cn/name": "g", "gang.unicore.mcyou.cn/available-count": "1"}))
    assert one is not None and not one.is_gang
    assert gang_ref(pod({"app": "web"})) is None


def test_gangs_are_per_namespace_and_keys_configurable() -> None:
    config = GangConfig(labels=parse_label_pairs("example.com/job=example.com/quorum"))
    a = pod({"example.com/job": "j"}, {"example.com/quorum": "2"}, ns="a")
    b = pod({"example.com/job": "j"}, {"example.com/quorum": "2"}, ns="b")
    assert gang_of(a, config=config) == ("a/j", 2) and gang_of(b, config=config) == ("b/j", 2)
    unicore = pod({"gang.unicore.mcyou.cn/name": "g", "gang.unicore.mcyou.cn/available-count": "2"})
    assert gang_of(unicore, config=config) is None
    with pytest.raises(ValueError):
        parse_label_pairs("no-equals-sign")


def _snapshot(nodes: list[NodeInfo], pending: list[PodInfo]) -> Snapshot:
    return Snapshot(nodes={n.name: n for n in nodes}, pending={p.uid: p for p in pending})


def _prio(pod: PodInfo, priority: int) -> PodInfo:
    pod.priority = priority
    return pod


def test_index_counts_pending_held_bound_and_skips_terminating() -> None:
    facts = node_facts(gpu_node("n1"))
    bound = pod_info(member("g-0", "g", 4))
    held = pod_info(member("g-1", "g", 4))
    held.assumed = True
    leaving = pod_info(member("g-2", "g", 4))
    leaving.deletion_timestamp = "2024-01-01T00:00:00Z"
    waiting = pod_info(member("g-3", "g", 4))
    other = pod_info(member("x", None))
    node = NodeInfo.build("n1", facts, [bound, held, leaving, other])
    snap = _snapshot([node], [waiting, held])  # an assumed pod is still pending in the API
    members = GangIndex(snap).members("default/g")
    assert [p.name for p in members.bound] == ["g-0"]
    assert [p.name for p in members.held] == ["g-1"]
    assert [p.name for p in members.pending] == ["g-3"]
    assert members.count == 3 and members.placed == 2 and members.bound_uids() == [bound.uid]
    assert gang_of_for(snap)(waiting) == ("default/g", 4)


def test_a_held_member_belongs_where_its_current_pending_record_says() -> None:
    """The reservation keeps the pod as it was at bind; the pending record is the API's current one."""
    facts = node_facts(gpu_node("n1"))
    moved, leaving, staying = (pod_info(member(f"g-{i}", "g", 3)) for i in range(3))
    for held in (moved, leaving, staying):
        held.assumed = True
    node = NodeInfo.build("n1", facts, [moved, leaving, staying])
    moved_now = pod_info(member("g-0", "other", 3, uid=moved.uid))
    leaving_now = pod_info(member("g-1", "g", 3, uid=leaving.uid))
    leaving_now.deletion_timestamp = "2024-01-01T00:00:00Z"
    index = GangIndex(_snapshot([node], [moved_now, leaving_now, staying]))
    assert [p.name for p in index.members("default/g").held] == ["g-2"]
    assert [p.uid for p in index.members("default/other").held] == [moved.uid]
    alone = GangIndex(_snapshot([NodeInfo.build("n1", facts, [leaving])], [leaving_now]))
    assert "default/g" not in alone.gangs  # no live member left: not a gang of the snapshot


def test_needed_requests_is_a_lower_bound_over_the_smallest_members() -> None:
    small = pod_info(member("a", "g", 2, gpus=1))
    big = pod_info(member("b", "g", 2, gpus=4))
    assert needed_requests([big, small], 1)[GPU] == 1
    assert needed_requests([big, small], 2)[GPU] == 5
    assert needed_requests([big, small], 2)["pods"] == 2


def test_capacity_shortfall_counts_only_feasible_nodes_and_what_is_already_placed() -> None:
    n1 = NodeInfo.build("n1", node_facts(gpu_node("n1", gpus=4)), [])
    n2 = NodeInfo.build("n2", node_facts(gpu_node("n2", gpus=4)), [])
    pending = [pod_info(member(f"g-{i}", "g", 6)) for i in range(6)]
    snap = _snapshot([n1, n2], pending)
    members = GangIndex(snap).members("default/g")
    assert capacity_shortfall("default/g", members, 6, snap, ["n1", "n2"]) == ""
    reason = capacity_shortfall("default/g", members, 6, snap, ["n1"])
    assert "gang default/g cannot fit" in reason and f"{GPU} 6 (free 4)" in reason and "1 node(s)" in reason
    # Two members already hold reservations on n1: only four more are needed, and n1 has 2 left.
    held = [pod_info(member(f"h-{i}", "g", 6)) for i in range(2)]
    for h in held:
        h.assumed = True
    n1_busy = NodeInfo.build("n1", n1.node, held)
    snap2 = _snapshot([n1_busy, n2], pending[:4])
    members2 = GangIndex(snap2).members("default/g")
    assert capacity_shortfall("default/g", members2, 6, snap2, ["n1", "n2"]) == ""
    assert "4 more member(s)" in capacity_shortfall("default/g", members2, 6, snap2, ["n1"])


def test_capacity_shortfall_counts_members_one_node_at_a_time() -> None:
    """Five members of 3 GPUs need 15 of the 16 free GPUs, but only one fits per 4-GPU node."""
    nodes = [NodeInfo.build(f"n{i}", node_facts(gpu_node(f"n{i}", gpus=4)), []) for i in range(4)]
    names = [n.name for n in nodes]
    five = [pod_info(member(f"g-{i}", "g", 5, gpus=3)) for i in range(5)]
    snap = _snapshot(nodes, five)
    reason = capacity_shortfall("default/g", GangIndex(snap).members("default/g"), 5, snap, names)
    assert "it needs 5 more member(s), but the 4 node(s) that pass its predicates have room for 4" in reason
    assert capacity_shortfall("default/g", GangIndex(snap).members("default/g"), 4, snap, names) == ""
    # Mixed sizes: the smallest member bounds how many fit per node, so a fitting mix passes.
    mixed = [pod_info(member(f"m-{i}", "m", 4, gpus=g)) for i, g in enumerate((1, 1, 3, 3))]
    snap2 = _snapshot(nodes[:2], mixed)
    assert capacity_shortfall("default/m", GangIndex(snap2).members("default/m"), 4, snap2, names[:2]) == ""


def test_capacity_shortfall_counts_against_a_members_nodes_only_the_members_placed_like_it() -> None:
    """A driver with its own node selector, and four workers: the driver's one node has room for
    one member, which is all the quorum needs from the driver's kind; the workers need four."""
    driver_node = NodeInfo.build("d", node_facts(gpu_node("d", gpus=4)), [])
    workers_nodes = [NodeInfo.build(f"w{i}", node_facts(gpu_node(f"w{i}", gpus=4)), []) for i in range(2)]
    driver_pod = member("driver", "job", 5, gpus=4)
    driver_pod["spec"]["nodeSelector"] = {"role": "driver"}
    driver = pod_info(driver_pod)
    workers = [pod_info(member(f"worker-{i}", "job", 5, gpus=2)) for i in range(4)]
    snap = _snapshot([driver_node, *workers_nodes], [driver, *workers])
    members = GangIndex(snap).members("default/job")
    assert capacity_shortfall("default/job", members, 5, snap, ["d"], driver) == ""
    assert capacity_shortfall("default/job", members, 5, snap, ["w0", "w1"], workers[0]) == ""
    reason = capacity_shortfall("default/job", members, 5, snap, ["w0"], workers[0])
    assert "the 4 more member(s) it needs" in reason and f"{GPU} 8 (free 4)" in reason
    # Counting every member against the driver's node would have turned the gang away.
    assert capacity_shortfall("default/job", members, 5, snap, ["d"]) != ""


def test_capacity_shortfall_counts_a_member_nominated_elsewhere_as_placed() -> None:
    """Four members of 2 GPUs: two are nominated to n2 (kube-scheduler preempted there, its victim of
    lower priority maybe not gone yet), so the member filtered now needs room for itself and one more."""
    n1 = NodeInfo.build("n1", node_facts(gpu_node("n1", gpus=4)), [])
    victim = _prio(pod_info(member("v", "other", 1, gpus=4)), 10)
    n2 = NodeInfo.build("n2", node_facts(gpu_node("n2", gpus=4)), [victim])
    four = [_prio(pod_info(member(f"g-{i}", "g", 4, gpus=2)), 100) for i in range(4)]
    for nominated in four[2:]:
        nominated.nominated_node_name = "n2"
    snap = _snapshot([n1, n2], four)
    members = GangIndex(snap).members("default/g")
    assert capacity_shortfall("default/g", members, 4, snap, ["n1"], four[0]) == ""
    # The member filtered now is nominated itself: it still needs room where it is asked about.
    four[0].nominated_node_name = "n1"
    assert capacity_shortfall("default/g", members, 4, snap, ["n1"], four[0]) == ""
    # A victim of the members' own priority is not evicted for them: n2 is not theirs, so the two
    # nominated there still need room, and n1's 4 GPUs hold two of the three left.
    victim.priority = 100
    assert "cannot fit" in capacity_shortfall("default/g", members, 4, snap, ["n1"], four[0])
    victim.priority = 10
    # Without the nominations, four members need 8 GPUs and n1 has 4.
    for nominated in four:
        nominated.nominated_node_name = ""
    unnominated = GangIndex(snap).members("default/g")
    assert "cannot fit" in capacity_shortfall("default/g", unnominated, 4, snap, ["n1"], four[0])


def test_a_nomination_holds_while_the_node_could_take_the_pod_once_lower_priority_pods_go() -> None:
    low = _prio(pod_info(member("low", None, gpus=2)), 10)
    same = _prio(pod_info(member("same", None, gpus=1)), 100)
    n1 = NodeInfo.build("n1", node_facts(gpu_node("n1", gpus=4)), [low, same])
    pod = _prio(pod_info(member("g-0", "g", 2, gpus=3)), 100)
    snap = _snapshot([n1], [pod])
    assert not keeps_nomination(snap, pod), "no nomination, nothing held"
    pod.nominated_node_name = "n1"
    # 4 GPUs, 1 held by a pod of the same priority: the low one going leaves 3, enough.
    assert keeps_nomination(snap, pod)
    low.deletion_timestamp = "2024-01-01T00:00:00Z"
    assert keeps_nomination(snap, pod), "a victim still terminating leaves room all the same"
    # Another pod nominated there, of the same priority, counts as there (kube-scheduler's filter adds
    # it for this pod); one of lower priority does not.
    twin = _prio(pod_info(member("twin", None, gpus=1)), 100)
    twin.nominated_node_name = "n1"
    assert not keeps_nomination(_snapshot([n1], [pod, twin]), pod)
    twin.priority = 10
    assert keeps_nomination(_snapshot([n1], [pod, twin]), pod)
    pod.requests[GPU] = 4
    assert not keeps_nomination(snap, pod), "the pod of its own priority stays"
    pod.requests[GPU] = 3
    pod.nominated_node_name = "gone"
    assert not keeps_nomination(snap, pod), "a node since deleted keeps nothing"
    # Two pod slots, both taken: GPUs are no obstacle for one GPU, the slot is.
    full = NodeInfo.build("n1", node_facts(gpu_node("n1", gpus=4, pods="2")), [low, same])
    pod.nominated_node_name = "n1"
    pod.requests[GPU] = 1
    assert keeps_nomination(_snapshot([full], [pod]), pod), "the low pod's slot is freed with it"
    low.priority = 100
    assert not keeps_nomination(_snapshot([full], [pod]), pod), "no pod slot left once nothing is evictable"


def test_a_nomination_to_a_node_since_cordoned_or_tainted_holds_nothing() -> None:
    pod = _prio(pod_info(member("g-0", "g", 2, gpus=1)), 100)
    pod.nominated_node_name = "n1"

    def nominated_to(**spec: object) -> Snapshot:
        node = gpu_node("n1", gpus=4)
        node["spec"] = {**node.get("spec", {}), **spec}
        return _snapshot([NodeInfo.build("n1", node_facts(node), [])], [pod])

    assert keeps_nomination(nominated_to(), pod)
    cordoned = nominated_to(unschedulable=True)
    assert not keeps_nomination(cordoned, pod), "a drained (cordoned) node keeps nothing"
    no_schedule = {"key": "maintenance", "value": "yes", "effect": "NoSchedule"}
    tainted = nominated_to(taints=[no_schedule])
    assert not keeps_nomination(tainted, pod)
    assert not keeps_nomination(nominated_to(taints=[{**no_schedule, "effect": "NoExecute"}]), pod)
    assert keeps_nomination(nominated_to(taints=[{**no_schedule, "effect": "PreferNoSchedule"}]), pod), "scoring only"
    pod.tolerations = [
        {"key": "maintenance", "operator": "Exists"},
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
    ]
    assert keeps_nomination(tainted, pod), "a tolerated taint keeps the node"
    assert keeps_nomination(cordoned, pod), "as kube-scheduler's NodeUnschedulable: tolerated, it may still land"


def test_index_cache_reuses_unchanged_nodes_and_sees_changed_ones() -> None:
    from extenders.gang.membership import GangIndexCache

    facts = node_facts(gpu_node("n1"))
    a = pod_info(member("g-0", "g", 3))
    b = pod_info(member("g-1", "g", 3))
    c = pod_info(member("g-2", "g", 3))
    n1 = NodeInfo.build("n1", facts, [a])
    n2 = NodeInfo.build("n2", node_facts(gpu_node("n2")), [])
    cache = GangIndexCache()
    first = cache.get(_snapshot([n1, n2], [b, c]))
    assert (len(first.members("default/g").bound), len(first.members("default/g").pending)) == (1, 2)
    entries_n1 = cache._nodes["n1"][1]
    n2_changed = NodeInfo.build("n2", n2.node, [b])
    second = cache.get(_snapshot([n1, n2_changed], [b, c]))
    assert cache._nodes["n1"][1] is entries_n1  # the shared NodeInfo was not scanned again
    members = second.members("default/g")
    assert sorted(p.name for p in members.bound) == ["g-0", "g-1"] and [p.name for p in members.pending] == ["g-2"]
    ref = second.ref("default/g")
    assert ref is not None and ref.min_member == 3
    assert second.ref("default/none") is None


@pytest.mark.parametrize(
    ("spec", "group"),
    [
        ({"schedulingGroup": {"podGroupName": "training-workers-0"}}, "training-workers-0"),  # 1.36 and later
        ({"workloadRef": {"name": "training", "podGroup": "workers"}}, "training/workers"),  # 1.35
        (
            {"workloadRef": {"name": "training", "podGroup": "workers", "podGroupReplicaKey": "r1"}},
            "training/workers/r1",
        ),
        ({}, ""),
    ],
)
def test_a_pod_of_a_native_group_is_no_gang_member_here_whatever_its_labels(
    spec: dict[str, object], group: str
) -> None:
    body = make_pod(
        "p", labels={"scheduling.x-k8s.io/pod-group": "g"}, annotations={"scheduling.x-k8s.io/min-available": "4"}
    )
    body["spec"].update(spec)
    info = pod_info(body)
    assert info.native_group == group
    # kube-scheduler's GangScheduling holds a native group; holding it here too could only deadlock.
    assert (gang_ref(info) is None) == bool(group)
    assert (gang_key(info) is None) == bool(group)
