"""ImageLocality: image sizes on the node, scaled by how widely each image is spread."""

from __future__ import annotations

from typing import Any

import pytest

from extenders.plugins.image_locality import image_priority, normalized_image_name
from tests.unit.plugins.node_facts import node, pod
from tests.unit.plugins.scoring import run

MIB = 2**20


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("nginx", "nginx:latest"),
        ("nginx:1.25", "nginx:1.25"),
        ("localhost:5000/app", "localhost:5000/app:latest"),
        ("localhost:5000/app:v2", "localhost:5000/app:v2"),
        ("nginx@sha256:0123abcd", "nginx@sha256:0123abcd"),
        ("docker.io/library/nginx", "docker.io/library/nginx:latest"),
    ],
)
def test_normalized_image_name(name: str, expected: str) -> None:
    assert normalized_image_name(name) == expected


def _containers(*images: str) -> dict[str, Any]:
    return {"containers": [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]}


def test_image_locality_weights_size_by_spread() -> None:
    incoming = pod(_containers("nginx", "localhost:5000/app"))
    nodes = [
        node(
            "n1",
            images=[
                (["nginx:latest", "docker.io/library/nginx:latest"], 300 * MIB),
                (["localhost:5000/app:latest"], 500 * MIB),
            ],
        ),
        node("n2", images=[(["nginx:latest"], 300 * MIB)]),
        node("n3"),
        node("n4", images=[(["nginx:1.25"], 300 * MIB)]),  # another tag is another image
    ]
    raw, normalized = run("ImageLocality", incoming, nodes)
    # nginx on 2 of 4 nodes (150 MiB), app on 1 of 4 (125 MiB); two images -> range 23..2000 MiB,
    # scaled to 0..100 in integers: 100 * 252 // 1977 = 12 and 100 * 127 // 1977 = 6.
    assert raw == {"n1": 1.2, "n2": 0.6, "n3": 0.0, "n4": 0.0}
    assert normalized == raw


def test_image_locality_spread_counts_every_node_in_the_snapshot() -> None:
    incoming = pod(_containers("big:v1"))
    candidate = node("n1", images=[(["big:v1"], 800 * MIB)])
    others = [node("n2", images=[(["big:v1"], 800 * MIB)]), node("n3"), node("n4")]
    raw, _ = run("ImageLocality", incoming, [candidate], extra=others)
    # present on 2 of 4 nodes: 400 MiB of a 1000 MiB single-image range, 100 * 377 // 977 = 38
    assert raw["n1"] == 3.8


@pytest.mark.parametrize(
    ("size_mib", "expected"),
    [(4000, 10.0), (1000, 10.0), (20, 0.0), (23, 0.0), (511.5, 5.0), (120.8, 1.0), (120.6, 0.9)],
)
def test_image_locality_clamps_and_scales_in_whole_points(size_mib: float, expected: float) -> None:
    incoming = pod(_containers("img:v1"))
    raw, _ = run("ImageLocality", incoming, [node("n1", images=[(["img:v1"], int(size_mib * MIB))])])
    assert raw["n1"] == expected


# One cluster of four nodes: big (1500 MiB) on n1 only, small (100 MiB) on n2 only, so each
# counts a quarter of its size: 375 MiB and 25 MiB.
CLUSTER = {"n1": [(["big:v1"], 1500 * MIB)], "n2": [(["small:v1"], 100 * MIB)], "n3": [], "n4": []}


def _volume(reference: str) -> dict[str, Any]:
    return {"name": f"v-{reference}", "image": {"reference": reference, "pullPolicy": "IfNotPresent"}}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        # one image: 100 * (375 - 23) // 977 = 36
        pytest.param(_containers("big:v1"), {"n1": 3.6, "n2": 0.0}, id="container"),
        # an init container's image counts like a container's: two images, 100 * 352 // 1977 = 17
        pytest.param(
            {"initContainers": [{"name": "i", "image": "big:v1"}], **_containers("small:v1")},
            {"n1": 1.7, "n2": 0.0},
            id="init-container-image",
        ),
        # an image volume's image counts too
        pytest.param(
            {**_containers("small:v1"), "volumes": [_volume("big:v1"), {"name": "scratch", "emptyDir": {}}]},
            {"n1": 1.7, "n2": 0.0},
            id="image-volume",
        ),
        # images no node holds still widen the range: three images, 100 * 352 // 2977 = 11
        pytest.param(
            {
                "initContainers": [{"name": "i", "image": "absent:v1"}],
                **_containers("big:v1"),
                "volumes": [_volume("gone:v1")],
            },
            {"n1": 1.1, "n2": 0.0},
            id="absent-images-widen-the-range",
        ),
        # a sidecar is an init container as well
        pytest.param(
            {"initContainers": [{"name": "s", "image": "big:v1", "restartPolicy": "Always"}], **_containers("x:1")},
            {"n1": 1.7, "n2": 0.0},
            id="sidecar-image",
        ),
    ],
)
def test_image_locality_scores_init_containers_containers_and_image_volumes(
    spec: dict[str, Any], expected: dict[str, float]
) -> None:
    nodes = [node(name, images=images) for name, images in CLUSTER.items()]
    raw, _ = run("ImageLocality", pod(spec), nodes[:2], extra=nodes[2:])
    assert raw == expected


@pytest.mark.parametrize(
    ("order", "expected"),
    [
        # kube-scheduler keeps one size per image name, the first node's (here by name: "a"), so
        # "b" scores with 800 MiB too; on 2 of 4 nodes: 400 MiB each, 100 * 377 // 977 = 38.
        (("a", "b"), {"a": 3.8, "b": 3.8}),
        (("b", "a"), {"a": 3.8, "b": 3.8}),
    ],
)
def test_image_locality_uses_one_size_per_image_whichever_node_reports_it(
    order: tuple[str, str], expected: dict[str, float]
) -> None:
    sizes = {"a": 800 * MIB, "b": 400 * MIB}
    nodes = [node(name, images=[(["img:v1"], sizes[name])]) for name in order]
    raw, _ = run("ImageLocality", pod(_containers("img:v1")), nodes, extra=[node("c"), node("d")])
    assert raw == expected


def test_image_locality_without_images() -> None:
    assert image_priority(500 * MIB, 0) == 0.0
    raw, normalized = run("ImageLocality", pod(_containers("nginx")), [node("n1"), node("n2")])
    assert raw == {"n1": 0.0, "n2": 0.0}
    assert normalized == {"n1": 0.0, "n2": 0.0}
