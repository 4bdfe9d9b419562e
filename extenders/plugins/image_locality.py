"""ImageLocality: prefer nodes that already hold the pod's images.

The images are those of the init containers (from 1.30), the containers and the image volumes
(from 1.36, and counted in the scale below from 1.37: see extenders.features). Each one
present on the node adds ``size * (nodes having it / all nodes)``, so an image that is
everywhere does not pull pods onto one node. The sum is clamped to 23 MiB .. 1000 MiB per
image and scaled to kube-scheduler's 0..100 in integers, as kube-scheduler does: small images
are cheap to pull anyway, and one huge image should not dominate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from extenders.features import Features
from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import MAX_PRIORITY, ConstantScore, ScoringContext, summary_of
from extenders.plugins.helper.normalize import clamp, clamp_values
from extenders.snapshot import Snapshot

MIB = 1024 * 1024
MIN_THRESHOLD = 23 * MIB
MAX_CONTAINER_THRESHOLD = 1000 * MIB
MAX_NODE_SCORE = 100  # kube-scheduler's framework.MaxNodeScore, in which the score is computed


def normalized_image_name(name: str) -> str:
    """A reference without a tag or digest means ``:latest`` (a ``:`` before the last ``/`` is a port)."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def image_priority(sum_scores: int, images: int) -> float:
    """Clamp the summed image scores, scale them to kube-scheduler's integer 0..100, then to 0..MAX."""
    max_threshold = MAX_CONTAINER_THRESHOLD * images
    if max_threshold <= MIN_THRESHOLD:
        return 0.0
    clamped = min(max(sum_scores, MIN_THRESHOLD), max_threshold)
    score = MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)
    return score * MAX_PRIORITY / MAX_NODE_SCORE


def scaled_image_score(size: int, having: int, total: int) -> int:
    """One image's share: its size scaled by the fraction of nodes holding it, truncated as kube-scheduler does."""
    return int(size * (having / total))


class ImageState:
    """Per pod: each of its images some node holds, with its scaled score, and how many images it has."""

    __slots__ = ("holders", "image_count", "images")

    def __init__(
        self,
        images: tuple[tuple[str, int], ...],
        image_count: int,
        holders: tuple[dict[str, int], ...] = (),
    ) -> None:
        self.images = images
        self.image_count = image_count  # of init containers, containers and image volumes: the clamp's scale
        # Per image of ``images``: the nodes that hold it (node name -> its size there).
        self.holders = holders


def _size_of(image: str) -> Callable[[NodeInfo], int | None]:
    def extract(info: NodeInfo) -> int | None:
        return info.node.images.get(image) if info.node is not None else None

    return extract


def counted_images(pod: PodInfo, features: Features) -> tuple[list[str], int]:
    """The pod's images the followed release sums, and the image count its score range scales with."""
    start = 0 if features.image_locality_counts_init_containers else pod.init_images
    containers_end = len(pod.images) - pod.volume_images
    if not features.image_locality_counts_image_volumes:
        summed = pod.images[start:containers_end]
        return summed, len(summed)
    summed = pod.images[start:]
    return summed, len(summed) if features.image_locality_scales_by_image_volumes else containers_end - start


class ImageLocalityScorer:
    def prepare(self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], ctx: ScoringContext) -> ImageState:
        images, scale = counted_images(pod, snapshot.features)
        names = [normalized_image_name(image) for image in images]
        if not names:
            return ImageState((), 0)
        summary = summary_of(snapshot, ctx)  # node counts and sizes per image, kept across calls
        total = summary.total
        having = {name: summary.image_nodes(name) for name in set(names)}
        # Images no node holds cannot score; with none left, score() returns 0 at once. The size is
        # kube-scheduler's one per image, not each node's own report of it.
        present = tuple(
            (name, scaled_image_score(summary.image_size(name), having[name], total)) for name in names if having[name]
        )
        holders = tuple(summary.column(("image-size", name), _size_of(name)) for name, _score in present)
        return ImageState(present, scale, holders)

    def score(self, pod: PodInfo, node: NodeInfo, state: Any, ctx: ScoringContext) -> float:
        facts = node.node
        if not state.images or facts is None or not facts.images:
            return 0.0
        node_images = facts.images
        total = 0
        for name, scaled in state.images:
            if name in node_images:
                total += scaled
        return image_priority(total, state.image_count)

    def constant(
        self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], state: Any, ctx: ScoringContext
    ) -> ConstantScore | None:
        return None if state.images else (0.0, 0.0)  # no image of the pod on any node

    def score_all(self, pod: PodInfo, nodes: list[NodeInfo], state: Any, ctx: ScoringContext) -> list[float]:
        """``score`` for each node: per image, one lookup in the nodes holding it."""
        images: tuple[tuple[str, int], ...] = state.images
        if not images:
            return [0.0] * len(nodes)
        names = [node.name for node in nodes]
        image_count = state.image_count
        if len(images) == 1:  # the common case: a node holds the image or scores 0
            value = image_priority(images[0][1], image_count)
            return [value if held else 0.0 for held in map(state.holders[0].__contains__, names)]
        totals = [0] * len(names)
        for (_image, scaled), holders in zip(images, state.holders, strict=True):
            for i, held in enumerate(map(holders.__contains__, names)):
                if held:
                    totals[i] += scaled
        # image_priority(0, ...) is 0.0: most nodes hold none of the images. Few totals are distinct.
        priorities: dict[int, float] = {0: 0.0}
        for total in set(totals).difference(priorities):
            priorities[total] = image_priority(total, image_count)
        return list(map(priorities.__getitem__, totals))

    def normalize(self, raw: dict[str, float], state: Any) -> dict[str, float]:
        return clamp(raw)

    def normalize_values(self, values: list[float], state: Any) -> list[float]:
        return clamp_values(values)
