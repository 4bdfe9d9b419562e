"""Read-only views of the shared snapshot, for operators and tests."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Request

from app.errors import documented
from app.responses import JSONAnswer
from app.state import get_state
from extenders.runtime import node_document

router = APIRouter(prefix="/v1", tags=["snapshot"], responses=documented(401, 503))


async def _snapshot(request: Request) -> Any:
    state = get_state(request)
    if state.scheduler is None:
        raise HTTPException(status_code=503, detail="the extender is starting")
    return await state.scheduler.snapshot()


@router.get("/nodes", summary="Every node in this replica's snapshot, with its generation")
async def list_nodes(request: Request) -> JSONAnswer:
    snap = await _snapshot(request)
    nodes = [{"name": n.name, "generation": n.generation} for n in sorted(snap.nodes.values(), key=lambda n: n.name)]
    return JSONAnswer({"generation": snap.generation, "nodes": nodes})


@router.get(
    "/nodes/{name}", summary="One node's aggregate: allocatable, requested, pods", responses=documented(404, 422)
)
async def get_node(name: str, request: Request) -> JSONAnswer:
    snap = await _snapshot(request)
    info = snap.nodes.get(name)
    if info is None:
        raise HTTPException(status_code=404, detail=f"node {name!r} is not in the snapshot")
    return JSONAnswer(node_document(info))
