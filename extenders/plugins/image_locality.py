"""ImageLocality: prefer nodes that already hold the pod's container images.

Each image present on the node adds ``size * (nodes having it / all nodes)``, so an image
that is everywhere does not pull pods onto one node. The sum is clamped to 23 MiB ..
1000 MiB per container and scaled to 0..MAX, as kube-scheduler does: small images are
cheap to pull anyway, and one huge image should not dominate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import MAX_PRIORITY, ConstantScore, ScoringContext, summary_of
from extenders.plugins.helper.normalize import clamp
from extenders.snapshot import Snapshot

MIB = 1024 * 1024
MIN_THRESHOLD = 23 * MIB
MAX_CONTAINER_THRESHOLD = 1000 * MIB


def normalized_image_name(name: str) -> str:
    """A reference without a tag or digest means ``:latest`` (a ``:`` before the last ``/`` is a port)."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def image_priority(sum_scores: float, containers: int) -> float:
    """Clamp the summed image scores and scale them to 0..MAX."""
    max_threshold = MAX_CONTAINER_THRESHOLD * containers
    if max_threshold <= MIN_THRESHOLD:
        return 0.0
    clamped = min(max(sum_scores, MIN_THRESHOLD), max_threshold)
    return MAX_PRIORITY * (clamped - MIN_THRESHOLD) / (max_threshold - MIN_THRESHOLD)


class ImageState:
    """Per pod: each container's normalised image with its spread over the cluster."""

    __slots__ = ("containers", "images", "sizes")

    def __init__(
        self,
        images: tuple[tuple[str, float], ...],
        containers: int,
        sizes: tuple[dict[str, int], ...] = (),
    ) -> None:
        self.images = images
        self.containers = containers
        # Per image of ``images``: node name -> its size there, for the nodes that hold it.
        self.sizes = sizes


def _size_of(image: str) -> Callable[[NodeInfo], int | None]:
    def extract(info: NodeInfo) -> int | None:
        return info.node.images.get(image) if info.node is not None else None

    return extract


class ImageLocalityScorer:
    def prepare(self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], ctx: ScoringContext) -> ImageState:
        names = [normalized_image_name(image) for image in pod.images]
        if not names:
            return ImageState((), 0)
        summary = summary_of(snapshot, ctx)  # node counts per image, kept across calls
        total = summary.total
        having = {name: summary.image_nodes(name) for name in set(names)}
        # Images no node holds cannot score; with none left, score() returns 0 at once.
        present = tuple((name, having[name] / total) for name in names if having[name])
        sizes = tuple(summary.column(("image-size", name), _size_of(name)) for name, _spread in present)
        return ImageState(present, len(names), sizes)

    def score(self, pod: PodInfo, node: NodeInfo, state: Any, ctx: ScoringContext) -> float:
        facts = node.node
        if not state.images or facts is None or not facts.images:
            return 0.0
        node_images = facts.images
        total = 0.0
        for name, spread in state.images:
            size = node_images.get(name)
            if size is not None:
                total += size * spread
        return image_priority(total, state.containers)

    def constant(
        self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], state: Any, ctx: ScoringContext
    ) -> ConstantScore | None:
        return None if state.images else (0.0, 0.0)  # no image of the pod on any node

    def score_all(self, pod: PodInfo, nodes: list[NodeInfo], state: Any, ctx: ScoringContext) -> list[float]:
        """``score`` for each node: per image, one lookup in the nodes holding it (same summing order)."""
        images: tuple[tuple[str, float], ...] = state.images
        if not images:
            return [0.0] * len(nodes)
        names = [node.name for node in nodes]
        totals = [0.0] * len(names)
        for (_image, spread), sizes in zip(images, state.sizes, strict=True):
            for i, size in enumerate(map(sizes.get, names)):
                if size is not None:
                    totals[i] += size * spread
        containers = state.containers
        # image_priority(0.0, ...) is 0.0: most nodes hold none of the images.
        return [image_priority(total, containers) if total else 0.0 for total in totals]

    def normalize(self, raw: dict[str, float], state: Any) -> dict[str, float]:
        return clamp(raw)
