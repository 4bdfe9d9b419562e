"""The kube-scheduler release the plug-ins follow: where its default plug-ins changed behaviour
between releases, each difference is one property here, read by the plug-in it concerns.

The extender wire format did not change across 1.28 to 1.37, but messages, scores and victim
choices did; a verdict that matches the cluster's own kube-scheduler needs its release.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

# The releases the project is tested against span these minors (1.28 to 1.37); an older cluster
# is followed as the oldest, a newer one as the newest.
OLDEST_MINOR = 28
NEWEST_MINOR = 37


class VersionError(ValueError):
    """A version string that names no Kubernetes 1.x release."""


@dataclass(frozen=True, slots=True)
class Features:
    """Behaviour of kube-scheduler 1.``minor``.``patch``'s default plug-ins, one property per
    difference (the release each arrived in is in its docstring)."""

    minor: int = NEWEST_MINOR
    patch: int | None = None  # None: the release's latest patch

    @property
    def name(self) -> str:
        return f"1.{self.minor}" if self.patch is None else f"1.{self.minor}.{self.patch}"

    @property
    def behaviour(self) -> str:
        """Every difference's value, one digit each: releases that behave alike have the same
        (worked out once per release: every filter call's class digest reads it)."""
        return _behaviour(self)

    def _at_least(self, minor: int, patch: int) -> bool:
        return self.minor > minor or (self.minor == minor and (self.patch is None or self.patch >= patch))

    @property
    def taint_reason_names_taint(self) -> bool:
        """TaintToleration's filter reason names the taint ("{key: value}") before 1.35 and 1.34.2;
        from then on taints stay out of scheduling messages (they may be sensitive)."""
        return not self._at_least(34, 2)

    @property
    def rwop_reason_new_wording(self) -> bool:
        """VolumeRestrictions' ReadWriteOncePod conflict has its reworded message from 1.34."""
        return self.minor >= 34

    @property
    def balanced_allocation_skips_best_effort(self) -> bool:
        """From 1.33 NodeResourcesBalancedAllocation skips a pod that requests nothing (it scores 0
        everywhere); before, such a pod was scored on the nodes' existing balance."""
        return self.minor >= 33

    @property
    def balanced_allocation_scores_change(self) -> bool:
        """From 1.36 NodeResourcesBalancedAllocation scores how the pod changes a node's balance
        (``MAX/2 + (MAX/2 + with - without) / 2``), not the balance with the pod alone."""
        return self.minor >= 36

    @property
    def image_locality_counts_init_containers(self) -> bool:
        """ImageLocality sums the init containers' images too from 1.30 (containers' only before)."""
        return self.minor >= 30

    @property
    def image_locality_counts_image_volumes(self) -> bool:
        """ImageLocality sums image volumes' images from 1.36."""
        return self.minor >= 36

    @property
    def image_locality_scales_by_image_volumes(self) -> bool:
        """From 1.37 image volumes also widen ImageLocality's score range (1.36 summed them only)."""
        return self.minor >= 37

    @property
    def victims_pdb_violating_first(self) -> bool:
        """Before 1.32 preemption lists a node's PDB-violating victims ahead of the others, and its
        choice of node reads the first as the most important; from 1.32 victims are in priority order."""
        return self.minor < 32


@functools.cache
def _behaviour(features: Features) -> str:
    return "".join("1" if getattr(features, name) else "0" for name in DIFFERENCES)


NEWEST = Features()
# The properties that are differences of behaviour (all but the release's own numbers and names).
DIFFERENCES = tuple(
    name for name, value in vars(Features).items() if isinstance(value, property) and name not in ("name", "behaviour")
)


def parse_version(text: str) -> Features:
    """The features of a version string as the API server or a user gives it ("v1.28.7",
    "1.30", "v1.29.4-eks-036c24b"): clamped to the followed range; without a patch, the latest."""
    found = re.fullmatch(r"v?1\.(\d+)(?:\.(\d+))?(?:[-+].*)?", text.strip())
    if found is None:
        raise VersionError(f"not a Kubernetes 1.x version: {text!r} (expected e.g. 1.31 or v1.31.4)")
    minor = int(found.group(1))
    patch = int(found.group(2)) if found.group(2) is not None else None
    if minor < OLDEST_MINOR:
        return Features(OLDEST_MINOR, 0)
    if minor > NEWEST_MINOR:
        return Features(NEWEST_MINOR)
    return Features(minor, patch)
