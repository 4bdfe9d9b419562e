"""The equivalence class: every field scheduling reads changes it, identity never does."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from typing import Any

import pytest

from extenders.equivalence import CLASS_FIELDS, IGNORED_FIELDS, equivalence_class
from extenders.model import Owner, PodInfo


def base() -> PodInfo:
    return PodInfo(
        namespace="ns",
        name="web-1",
        uid="u1",
        labels={"app": "web", "tier": "front"},
        requests={"cpu": 500, "memory": 2**30},
        nonzero_cpu=500,
        nonzero_memory=2**30,
        node_selector={"disk": "ssd"},
        tolerations=[{"key": "k", "operator": "Exists"}],
    )


# One altered value per class field: each must give another class.
ALTERED: dict[str, Any] = {
    "namespace": "other",
    "labels": {"app": "web", "tier": "back"},
    "node_name": "n1",
    "priority": 1000,
    "preemption_policy": "Never",
    "requests": {"cpu": 501, "memory": 2**30},
    "nonzero_cpu": 501,
    "nonzero_memory": 2**29,
    "score_nonzero": (600, 2**30),
    "best_effort": True,
    "host_ports": [("TCP", "0.0.0.0", 80)],
    "node_selector": {"disk": "hdd"},
    "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}},
    "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
    "topology_spread": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
    "volumes": [{"name": "d", "gcePersistentDisk": {"pdName": "x"}}],
    "images": ["registry/web:2"],
    "init_images": 1,
    "volume_images": 1,
}
IDENTITY: dict[str, Any] = {
    "name": "web-2",
    "uid": "u2",
    "annotations": {"kube-gang-extender/requeued-at": "now"},
    "phase": "Pending",
    "scheduler_name": "gang-scheduler",
    "deletion_timestamp": "2026-01-01T00:00:00Z",
    "creation_timestamp": "2026-01-01T00:00:00Z",
    "start_time": "2026-01-01T00:00:00Z",
    "owner": Owner("ReplicaSet", "web-abc", "rs-uid"),
    "assumed": True,
    "nominated_node_name": "n1",
    "native_group": "training-workers-0",
    "scheduling_gates": ["kube-gang-extender/gang-assembly"],
}


def test_every_pod_field_is_either_in_the_class_or_deliberately_left_out() -> None:
    fields = [f.name for f in dataclasses.fields(PodInfo)]
    assert sorted(CLASS_FIELDS + IGNORED_FIELDS) == sorted(fields)
    assert not set(CLASS_FIELDS) & set(IGNORED_FIELDS)
    assert set(ALTERED) == set(CLASS_FIELDS) and set(IDENTITY) == set(IGNORED_FIELDS)


@pytest.mark.parametrize("field", CLASS_FIELDS)
def test_a_field_scheduling_reads_changes_the_class(field: str) -> None:
    pod = base()
    changed = dataclasses.replace(pod, **{field: ALTERED[field]})
    assert equivalence_class(changed) != equivalence_class(pod)


@pytest.mark.parametrize("field", IGNORED_FIELDS)
def test_identity_and_lifecycle_fields_do_not(field: str) -> None:
    pod = base()
    assert equivalence_class(dataclasses.replace(pod, **{field: IDENTITY[field]})) == equivalence_class(pod)


def test_map_order_does_not_matter() -> None:
    pod = base()
    reordered = dataclasses.replace(pod, labels={"tier": "front", "app": "web"}, requests={"memory": 2**30, "cpu": 500})
    assert equivalence_class(reordered) == equivalence_class(pod)


def test_the_class_is_the_same_in_another_process() -> None:
    code = (
        "from tests.unit.equivalence.test_classes import base;"
        "from extenders.equivalence import equivalence_class;"
        "print(equivalence_class(base()))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == equivalence_class(base())


def test_an_integer_beyond_64_bits_in_a_free_form_field_still_has_a_stable_class() -> None:
    """The API keeps some pod fields free-form (a volume's source): a huge integer there must not
    fail the request, and must still tell the pods apart."""
    huge = dataclasses.replace(base(), volumes=[{"name": "d", "gcePersistentDisk": {"pdName": "x", "n": 2**80}}])
    other = dataclasses.replace(huge, volumes=[{"name": "d", "gcePersistentDisk": {"pdName": "x", "n": 2**80 + 1}}])
    assert equivalence_class(huge) == equivalence_class(dataclasses.replace(huge))
    assert len({equivalence_class(huge), equivalence_class(other), equivalence_class(base())}) == 3
