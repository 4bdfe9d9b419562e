"""Gang bookkeeping for operators and tests: ``GET /v1/gangs`` and ``GET /v1/gangs/{namespace}/{name}``.

Redis errors become 503 through app.errors.
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request

from app.errors import documented
from app.responses import JSONAnswer
from app.state import get_state
from extenders.gang import GangService

router = APIRouter(prefix="/v1", tags=["gangs"], responses=documented(401, 503))


def _gangs(request: Request) -> GangService:
    gangs = get_state(request).gangs
    if gangs is None:
        raise HTTPException(status_code=503, detail="the extender is starting")
    return gangs


@router.get("/gangs", summary="Every gang known to Redis or present in the snapshot")
async def list_gangs(request: Request) -> JSONAnswer:
    return JSONAnswer(await _gangs(request).list_gangs())


@router.get(
    "/gangs/{namespace}/{name}",
    summary="One gang: quorum, members, arrivals, state, window left",
    responses=documented(404, 422),
)
async def get_gang(namespace: str, name: str, request: Request) -> JSONAnswer:
    doc = await _gangs(request).gang_status(namespace, name)
    if doc is None:
        raise HTTPException(status_code=404, detail=f"gang {namespace}/{name} is not known")
    return JSONAnswer(doc)
