"""The API server's release, read from ``/version`` and re-read now and then: a cluster upgraded
in place changes the kube-scheduler behaviour the plug-ins follow (extenders.features)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import httpx

from extenders.features import Features, VersionError, parse_version
from extenders.kube.client import KubeApiError, KubeClient

log = logging.getLogger(__name__)

# Upgrades are rare and slow: a look every few minutes follows them closely enough.
RECHECK_SECONDS = 300.0
RETRY_SECONDS = (1.0, 60.0)  # first and longest wait after a failed read


async def read_version(kube: KubeClient) -> Features:
    """The features of the release ``/version`` reports (its ``gitVersion``)."""
    body = await kube.get("/version")
    text = body.get("gitVersion") if isinstance(body, dict) else None
    if not isinstance(text, str):
        raise VersionError(f"/version has no gitVersion: {body!r}")
    return parse_version(text)


async def follow_version(
    kube: KubeClient, follow: Callable[[Features], None], recheck: float = RECHECK_SECONDS
) -> None:
    """Call ``follow`` with the cluster's release whenever it is read anew, for ever."""
    wait, longest = RETRY_SECONDS
    known: Features | None = None
    while True:
        try:
            features = await read_version(kube)
        except (KubeApiError, httpx.HTTPError, ValueError, OSError) as exc:  # ValueError: not JSON, no version
            log.warning(
                "cannot read the API server's version (%s); following kube-scheduler %s meanwhile",
                exc,
                known.name if known else "as before",
            )
            await asyncio.sleep(wait)
            wait = min(wait * 2, longest)
            continue
        wait = RETRY_SECONDS[0]
        if features != known:
            log.info("following kube-scheduler %s, the API server's release", features.name)
            known = features
        follow(features)
        await asyncio.sleep(recheck)
