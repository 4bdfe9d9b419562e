"""Filter reads a pod of a known shape through that shape: the answer is the full path's, always."""

from __future__ import annotations

import contextlib
import copy
import random
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from app import translate
from app.kube_types import Container, ObjectMeta, PodCondition
from app.main import create_app
from app.pod_shapes import _UNREAD_CONDITION, _UNREAD_CONTAINER, _UNREAD_META, PodShapes
from app.settings import Settings
from app.wire import ExtenderArgs
from extenders.model import PodInfo
from tests.wire_captures import capture_paths

Json = dict[str, Any]
NAMES = ["n-0", "n-1", "n-2"]


def sibling(index: int, token: str = "abcde") -> Json:
    """A pod of one ReplicaSet as the API server makes them: its own name, uid, version, creation
    time and service-account token volume; after a failed attempt, a PodScheduled condition."""
    volume = f"kube-api-access-{token}"
    return {
        "metadata": {
            "name": f"web-6c9f-{index:05d}",
            "generateName": "web-6c9f-",
            "namespace": "shop",
            "uid": f"uid-{index}",
            "resourceVersion": str(100 + index),
            "creationTimestamp": f"2026-11-28T10:00:{index % 60:02d}Z",
            "labels": {"app": "web", "pod-template-hash": "6c9f"},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-6c9f", "uid": "rs-1", "controller": True}
            ],
            "managedFields": [{"manager": "kube-controller-manager", "time": f"2026-11-28T10:00:{index % 60:02d}Z"}],
        },
        "spec": {
            "volumes": [
                {"name": volume, "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "shared"}},
            ],
            "containers": [
                {
                    "name": "main",
                    "image": "registry/web:1",
                    "resources": {"requests": {"cpu": "250m", "memory": "128Mi"}},
                    "ports": [{"containerPort": 80, "hostPort": 8080}],
                    "volumeMounts": [{"name": volume, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                }
            ],
            "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
            "priority": 10,
            "schedulerName": "default-scheduler",
        },
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": f"0/{index} nodes are available",
                    "lastTransitionTime": f"2026-11-28T10:01:{index % 60:02d}Z",
                    "lastProbeTime": None,
                }
            ],
        },
    }


def body(pod: Json, names: list[str] = NAMES) -> bytes:
    return orjson.dumps({"Pod": pod, "NodeNames": names})


def full_path(raw: bytes) -> tuple[PodInfo, str, list[str]]:
    """What filter read from a body before shapes: the wire model, then the conversion."""
    args = ExtenderArgs.model_validate_json(raw)
    return translate.pod_info(args.Pod), args.Pod.metadata.resourceVersion or "", list(args.NodeNames or [])


def outcome(read: Callable[[bytes], Any], raw: bytes) -> Any:
    """``read``'s result as comparable data, or the kind of error the full path would answer."""
    try:
        got = read(raw)
    except ValidationError:
        return "422: invalid"
    except translate.BadRequest:
        return "422: bad request"
    if got is None:
        return None
    if isinstance(got, tuple):
        return got
    return got.pod, got.resource_version, got.names


def test_siblings_share_the_shape_and_each_gets_its_own_identity() -> None:
    shapes = PodShapes()
    first, second = sibling(1, "abcde"), sibling(2, "fghij")
    assert outcome(shapes.filter_inputs, body(first)) == full_path(body(first))
    assert (shapes.read, shapes.reused) == (1, 0)
    reused = shapes.filter_inputs(body(second))
    assert (shapes.read, shapes.reused) == (1, 1)
    assert reused is not None
    assert (reused.pod, reused.resource_version, reused.names) == full_path(body(second))
    assert (reused.pod.name, reused.pod.uid, reused.pod.creation_timestamp) == (
        "web-6c9f-00002",
        "uid-2",
        "2026-11-28T10:00:02Z",
    )


@pytest.mark.parametrize(
    "change",
    [
        lambda p: p["spec"]["containers"][0]["resources"]["requests"].update(cpu="300m"),
        lambda p: p["metadata"].update(namespace="other"),
        lambda p: p["metadata"]["ownerReferences"][0].update(uid="rs-2"),
        lambda p: p["spec"]["volumes"][1].update(name="other-data"),  # a volume that can conflict keeps its name
        lambda p: p["spec"].update(nodeName="n-1"),
        lambda p: p["status"]["conditions"][0].update(reason="SchedulerError"),
        lambda p: p["status"].update(phase="Running"),
        lambda p: p["spec"]["containers"][0].update(image="registry/web:2"),
        lambda p: p.update(kind="Pod"),
    ],
)
def test_a_pod_differing_in_what_scheduling_reads_is_read_in_full(change: Callable[[Json], None]) -> None:
    shapes = PodShapes()
    shapes.filter_inputs(body(sibling(1)))
    other = sibling(2, "zzzzz")
    change(other)
    assert outcome(shapes.filter_inputs, body(other)) == full_path(body(other))
    assert (shapes.read, shapes.reused) == (2, 0)


@pytest.mark.parametrize(
    ("where", "value"),
    [
        ("name", 5),
        ("uid", None),
        ("uid", ["x"]),
        ("resourceVersion", 7),
        ("creationTimestamp", {"t": 1}),
    ],
)
def test_an_identity_of_a_type_validation_refuses_never_takes_a_valid_siblings_shape(where: str, value: Any) -> None:
    shapes = PodShapes()
    shapes.filter_inputs(body(sibling(1)))
    hostile = sibling(2)
    hostile["metadata"][where] = value
    assert outcome(shapes.filter_inputs, body(hostile)) == "422: invalid" == outcome(full_path, body(hostile))
    assert shapes.reused == 0


def test_a_token_volume_whose_name_is_not_a_string_is_refused_as_before() -> None:
    shapes = PodShapes()
    shapes.filter_inputs(body(sibling(1)))
    hostile = sibling(2)
    hostile["spec"]["volumes"][0]["name"] = 12
    assert outcome(shapes.filter_inputs, body(hostile)) == "422: invalid" == outcome(full_path, body(hostile))


def test_the_fields_left_out_of_a_shape_are_ones_validation_does_not_read() -> None:
    """Drift guard: a field validation starts to read must leave the shapes (app.pod_shapes)."""
    assert not _UNREAD_META & set(ObjectMeta.model_fields)
    assert not _UNREAD_CONTAINER & set(Container.model_fields)
    assert not _UNREAD_CONDITION & set(PodCondition.model_fields)


def _mutations(rng: random.Random) -> Iterator[Callable[[Json], None]]:
    """Random edits, both in what a shape leaves out and in what it keeps, some of them hostile."""
    values: list[Any] = ["x", "", None, 3, 2.5, True, [], {}, ["a"], {"k": "v"}, "500m", -1]
    paths: list[tuple[str, ...]] = [
        ("metadata", "name"),
        ("metadata", "uid"),
        ("metadata", "resourceVersion"),
        ("metadata", "creationTimestamp"),
        ("metadata", "generateName"),
        ("metadata", "namespace"),
        ("metadata", "labels"),
        ("metadata", "managedFields"),
        ("metadata", "annotations"),
        ("spec", "hostname"),
        ("metadata", "deletionTimestamp"),
        ("spec", "priority"),
        ("spec", "nodeName"),
        ("spec", "schedulerName"),
        ("spec", "volumes"),
        ("spec", "containers"),
        ("status", "phase"),
        ("status", "conditions"),
        ("status", "nominatedNodeName"),
    ]
    while True:
        path = rng.choice(paths)
        value = rng.choice(values)

        def edit(pod: Json, path: tuple[str, ...] = path, value: Any = value) -> None:
            pod[path[0]][path[1]] = copy.deepcopy(value)

        yield edit
        yield lambda pod: pod["spec"]["volumes"][0].update(name=rng.choice(["kube-api-access-q", 1, None]))
        yield lambda pod: pod["spec"]["containers"][0].update(volumeMounts=rng.choice([[], None, "x", [{"n": 1}]]))
        yield lambda pod: pod["status"]["conditions"][0].update(lastTransitionTime=rng.choice(["t", 1, None]))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_whatever_the_pods_the_answer_is_the_full_paths(seed: int) -> None:
    """A stream of siblings, each with a few random edits, through one PodShapes: every read equals the
    full path's, or the full path refuses the body too."""
    rng = random.Random(seed)
    shapes = PodShapes(size=8)
    edits = _mutations(rng)
    for index in range(400):
        pod = sibling(index, rng.choice(["aaaaa", "bbbbb", "ccccc"]))
        for _ in range(rng.choice([0, 0, 1, 2])):
            with contextlib.suppress(AttributeError, TypeError, IndexError, KeyError):  # an earlier edit broke the path
                next(edits)(pod)
        raw = body(pod)
        mine, full = outcome(shapes.filter_inputs, raw), outcome(full_path, raw)
        assert mine is None or mine == full, (index, pod)
    assert shapes.reused > 100


def claiming(index: int, claim: str) -> Json:
    """A pod with a volume claim of its own, as a StatefulSet's: a shape of its own."""
    pod = sibling(index)
    pod["spec"]["volumes"][1]["persistentVolumeClaim"]["claimName"] = claim
    return pod


def test_a_shape_met_again_is_kept_while_shapes_met_once_pass_through() -> None:
    shapes = PodShapes(size=2)
    for index in (1, 2):  # met twice: kept
        shapes.filter_inputs(body(sibling(index)))
    for index in range(10):  # ten pods each of a shape of its own, as a StatefulSet's
        shapes.filter_inputs(body(claiming(100 + index, f"data-{index}")))
    assert (shapes.read, shapes.reused) == (11, 1)
    shapes.filter_inputs(body(sibling(3)))
    assert (shapes.read, shapes.reused) == (11, 2)
    shapes.filter_inputs(body(claiming(200, "data-0")))  # met once, eight shapes ago: gone
    assert shapes.read == 12


def test_kept_shapes_are_bounded_and_the_least_recently_met_goes_first() -> None:
    shapes = PodShapes(size=2)
    for app in ("a", "a", "b", "b", "a", "c", "c"):  # kept: a, b; a met again; c kept: b goes
        shapes.filter_inputs(body(claiming(1, app)))
    assert (shapes.read, shapes.reused) == (3, 4)
    shapes.filter_inputs(body(claiming(2, "a")))
    shapes.filter_inputs(body(claiming(2, "b")))
    assert (shapes.read, shapes.reused) == (4, 5)


def test_an_indexed_workloads_pods_share_the_shape_and_keep_their_own_labels_and_annotations() -> None:
    """A StatefulSet's or an indexed Job's pods carry their index in labels, an annotation and the
    hostname: one shape, each pod read with its own (which its equivalence class is computed from)."""
    shapes = PodShapes()
    pods = []
    for index in range(3):
        pod = sibling(index)
        pod["metadata"]["labels"]["apps.kubernetes.io/pod-index"] = str(index)
        pod["metadata"]["annotations"] = {"batch.kubernetes.io/job-completion-index": str(index)}
        pod["spec"]["hostname"] = f"trainer-{index}"
        pods.append(pod)
    read = [outcome(shapes.filter_inputs, body(pod)) for pod in pods]
    assert (shapes.read, shapes.reused) == (1, 2)
    assert read == [full_path(body(pod)) for pod in pods]
    assert [got[0].labels["apps.kubernetes.io/pod-index"] for got in read] == ["0", "1", "2"]


def test_siblings_with_their_own_annotations_share_the_shape_and_keep_their_annotations() -> None:
    shapes = PodShapes()
    shapes.filter_inputs(body(sibling(1)))
    stamped = sibling(2)
    stamped["metadata"]["annotations"] = {"requeued-at": "2026-11-28T10:00:00Z"}
    reused = shapes.filter_inputs(body(stamped))
    assert shapes.reused == 1 and reused is not None
    assert reused.pod == full_path(body(stamped))[0] and reused.pod.annotations == {
        "requeued-at": "2026-11-28T10:00:00Z"
    }
    hostile = sibling(3)
    hostile["metadata"]["annotations"] = {"a": 1}
    assert outcome(shapes.filter_inputs, body(hostile)) == "422: invalid" == outcome(full_path, body(hostile))
    hostile["metadata"]["annotations"] = {}
    hostile["metadata"]["labels"] = {"app": ["web"]}
    assert outcome(shapes.filter_inputs, body(hostile)) == "422: invalid" == outcome(full_path, body(hostile))


def test_a_body_in_another_form_is_left_to_the_full_path() -> None:
    shapes = PodShapes()
    pod = sibling(1)
    assert shapes.filter_inputs(orjson.dumps({"Pod": pod, "Nodes": {"items": []}})) is None
    assert shapes.filter_inputs(body(pod, ["n-0", "n-0"])) is None  # the full path says which name repeats
    assert shapes.filter_inputs(orjson.dumps({"Pod": "not a pod", "NodeNames": NAMES})) is None
    assert shapes.filter_inputs(orjson.dumps({"Pod": {"metadata": []}, "NodeNames": NAMES})) is None


@pytest.mark.parametrize(
    "path", [p for p in capture_paths() if p.name.startswith("filter-names")], ids=lambda p: p.name
)
def test_captured_filter_bodies_read_through_their_shape_as_in_full(path: Any) -> None:
    captured = orjson.loads(path.read_bytes())
    shapes = PodShapes()
    twin = copy.deepcopy(captured)
    twin["Pod"]["metadata"].update(name="twin", uid="twin-uid", resourceVersion="9")
    for raw in (orjson.dumps(captured), orjson.dumps(twin)):
        assert outcome(shapes.filter_inputs, raw) == full_path(raw)
    assert (shapes.read, shapes.reused) == (1, 1)


@pytest.fixture
def client(redis_url: str, redis_prefix: str) -> Iterator[TestClient]:
    settings = Settings(redis_url=redis_url, redis_prefix=redis_prefix, kube_mode="off")
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def test_through_the_app_a_hostile_sibling_is_still_refused_with_the_field_named(client: TestClient) -> None:
    assert client.post("/filter", content=body(sibling(1), [])).status_code == 200
    hostile = sibling(2)
    hostile["metadata"]["uid"] = 42
    answer = client.post("/filter", content=body(hostile, []), headers={"content-type": "application/json"})
    assert answer.status_code == 422
    assert "uid" in answer.text
    bad_quantity = sibling(3)
    bad_quantity["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "-1"
    answer = client.post("/filter", content=body(bad_quantity, []), headers={"content-type": "application/json"})
    assert answer.status_code == 422 and "cpu" in answer.text


def test_the_reads_are_counted_by_how(client: TestClient) -> None:
    for index in (1, 2, 3):
        assert client.post("/filter", content=body(sibling(index), [])).status_code == 200
    metrics = client.get("/metrics").text
    assert 'extender_filter_pod_reads_total{how="shape"} 2.0' in metrics
    assert 'extender_filter_pod_reads_total{how="full"} 1.0' in metrics
