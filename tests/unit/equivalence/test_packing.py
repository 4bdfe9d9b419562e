"""Entries shared between replicas: node digests equal across processes and change with the part
they stand for; an entry is read back only for an unchanged node under the same layout."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Callable

import pytest

from extenders.equivalence import digests
from extenders.equivalence.fingerprints import _CANONICAL, _VALUES, DIGEST_SIZE
from extenders.equivalence.packing import layout_tag, pack_filter, pack_scores, unpack_filter, unpack_scores
from extenders.model import NodeFacts, NodeInfo, PodInfo, Taint
from extenders.plugins.framework import NodeFamily, Verdict

FAMILIES = tuple(sorted(_VALUES))


def _node(**changes: object) -> NodeInfo:
    facts = NodeFacts(
        name="n1",
        labels={"zone": "a", "disk": "ssd"},
        taints=[Taint("dedicated", "gpu", "NoSchedule")],
        conditions={"Ready": "True"},
        allocatable={"cpu": 4000, "memory": 2**33, "pods": 110},
    )
    facts = dataclasses.replace(facts, **changes)  # type: ignore[arg-type]
    pods = [
        PodInfo(namespace="ns", name="p", uid="u1", requests={"cpu": 500}, host_ports=[("TCP", "0.0.0.0", 80)]),
        PodInfo(namespace="ns", name="q", uid="u2", requests={"memory": 2**30}),
    ]
    return NodeInfo.build("n1", facts, pods)


def test_every_family_has_a_canonical_text() -> None:
    assert set(_CANONICAL) == set(_VALUES)


def test_digests_are_equal_in_another_process_with_another_hash_seed() -> None:
    here = digests(_node(), FAMILIES).hex()
    code = (
        "from tests.unit.equivalence.test_packing import FAMILIES, _node\n"
        "from extenders.equivalence import digests\n"
        "print(digests(_node(), FAMILIES).hex())"
    )
    for seed in ("1", "2"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        )
        assert out.stdout.strip() == here


CHANGES: dict[str, Callable[[], NodeInfo]] = {
    NodeFamily.LABELS: lambda: _node(labels={"zone": "b", "disk": "ssd"}),
    NodeFamily.TAINTS: lambda: _node(unschedulable=True),
    NodeFamily.CONDITIONS: lambda: _node(conditions={"Ready": "False"}),
    NodeFamily.RESOURCES: lambda: _node(allocatable={"cpu": 8000, "memory": 2**33, "pods": 110}),
}


@pytest.mark.parametrize("family", sorted(CHANGES))
def test_a_changed_part_changes_its_digest_and_no_other(family: str) -> None:
    before, after = digests(_node(), FAMILIES), digests(CHANGES[family](), FAMILIES)
    for i, name in enumerate(FAMILIES):
        part = slice(i * DIGEST_SIZE, (i + 1) * DIGEST_SIZE)
        assert (before[part] != after[part]) == (name == family), name


def test_pods_and_ports_change_their_digests() -> None:
    node = _node()
    base = {f: digests(node, (f,)) for f in FAMILIES}
    node.add_pod(PodInfo(namespace="ns", name="r", uid="u3", host_ports=[("TCP", "0.0.0.0", 81)]))
    changed = {f for f in FAMILIES if digests(node, (f,)) != base[f]}
    assert changed == {NodeFamily.PODS, NodeFamily.PORTS, NodeFamily.RESOURCES}


def test_dict_order_does_not_change_a_digest() -> None:
    assert digests(_node(labels={"a": "1", "b": "2"}), FAMILIES) == digests(
        _node(labels={"b": "2", "a": "1"}), FAMILIES
    )


def test_a_filter_entry_reads_back_only_under_its_layout_and_unchanged_known_parts() -> None:
    tag = layout_tag("local:NodeResourcesFit:1|families:resources,taints")
    node = _node()
    families = (NodeFamily.RESOURCES, NodeFamily.TAINTS)
    current = digests(node, families)
    verdict = Verdict(False, "Insufficient cpu", unresolvable=False)
    blob = pack_filter(tag, 1, 0, verdict, current)
    assert unpack_filter(blob, tag, current) == (1, 0, verdict)
    assert unpack_filter(blob, tag + 1, current) is None
    # the verdict rests on the first family only: a change of the second leaves it valid
    tainted = digests(_node(unschedulable=True), families)
    assert unpack_filter(blob, tag, tainted) == (1, 0, verdict)
    grown = digests(_node(allocatable={"cpu": 8000}), families)
    assert unpack_filter(blob, tag, grown) is None
    passing = pack_filter(tag, 2, -1, None, current)
    assert unpack_filter(passing, tag, current) == (2, -1, None)
    assert unpack_filter(passing, tag, tainted) is None
    unresolvable = Verdict(False, "node(s) had untolerated taint {dedicated: gpu}", unresolvable=True)
    assert unpack_filter(pack_filter(tag, 2, 1, unresolvable, current), tag, current) == (2, 1, unresolvable)
    for broken in (b"", blob[:5], blob[:10], blob[:-1] + b"\xff"):  # short head, cut digests, bad UTF-8
        assert unpack_filter(broken, tag, current) is None


def test_raw_scores_read_back_only_for_an_unchanged_node_and_the_same_scorers() -> None:
    families = (NodeFamily.RESOURCES,)
    current = digests(_node(), families)
    blob = pack_scores((7.5, 3.25), current)
    assert unpack_scores(blob, 2, current) == (7.5, 3.25)
    assert unpack_scores(blob, 1, current) is None
    assert unpack_scores(blob, 2, digests(_node(allocatable={"cpu": 1}), families)) is None
    assert unpack_scores(blob[:-3], 2, current) is None
