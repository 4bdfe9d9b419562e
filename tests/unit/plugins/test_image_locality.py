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
    # nginx on 2 of 4 nodes, app on 1 of 4; two containers -> max threshold 2000 MiB
    n1 = 10 * (300 * 0.5 + 500 * 0.25 - 23) / (2000 - 23)
    n2 = 10 * (300 * 0.5 - 23) / (2000 - 23)
    assert raw == pytest.approx({"n1": n1, "n2": n2, "n3": 0.0, "n4": 0.0})
    assert normalized == pytest.approx(raw)


def test_image_locality_spread_counts_every_node_in_the_snapshot() -> None:
    incoming = pod(_containers("big:v1"))
    candidate = node("n1", images=[(["big:v1"], 800 * MIB)])
    others = [node("n2", images=[(["big:v1"], 800 * MIB)]), node("n3"), node("n4")]
    raw, _ = run("ImageLocality", incoming, [candidate], extra=others)
    # present on 2 of 4 nodes: 400 MiB of a 1000 MiB single-container range
    assert raw["n1"] == pytest.approx(10 * (400 - 23) / (1000 - 23))


@pytest.mark.parametrize(
    ("size_mib", "expected"),
    [(4000, 10.0), (1000, 10.0), (20, 0.0), (23, 0.0), (511.5, 5.0)],
)
def test_image_locality_clamps(size_mib: float, expected: float) -> None:
    incoming = pod(_containers("img:v1"))
    raw, _ = run("ImageLocality", incoming, [node("n1", images=[(["img:v1"], int(size_mib * MIB))])])
    assert raw["n1"] == pytest.approx(expected)


def test_image_locality_without_images() -> None:
    assert image_priority(500 * MIB, 0) == 0.0
    raw, normalized = run("ImageLocality", pod(_containers("nginx")), [node("n1"), node("n2")])
    assert raw == {"n1": 0.0, "n2": 0.0}
    assert normalized == {"n1": 0.0, "n2": 0.0}
