"""The equivalence cache's counters, for operators (the same are on /metrics)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from app.errors import documented
from app.responses import JSONAnswer
from app.state import get_state

router = APIRouter(prefix="/v1", tags=["cache"], responses=documented(401))


@router.get("/cache/stats", summary="Equivalence cache: on or off, classes, evictions, reuse per verb")
async def cache_stats(request: Request) -> JSONAnswer:
    state = get_state(request)
    shared = state.shared.document() if state.shared is not None else {"enabled": False}
    return JSONAnswer({**state.equivalence.document(), "shared": shared})
