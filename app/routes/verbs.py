"""The four extender verbs and /v1/explain: parse, hand to the Scheduler, write the answer.

BadRequest and Unevaluable (422) and SnapshotUnavailable (503) are mapped in app.errors.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel
from starlette.types import Receive

from app import translate
from app.errors import documented
from app.kube_types import Node
from app.responses import JSONAnswer
from app.routes.body_route import BodyRoute
from app.state import AppState, get_state
from app.wire import (
    ExplainArgs,
    ExtenderArgs,
    ExtenderBindingArgs,
    ExtenderBindingResult,
    ExtenderFilterResult,
    ExtenderPreemptionArgs,
    ExtenderPreemptionResult,
    HostPriority,
)
from extenders.model import PodInfo
from extenders.scheduling import CyclePod, Scheduler

router = APIRouter(tags=["extender"], responses=documented(400, 413, 422, 503), route_class=BodyRoute)
# /v1/explain sits with the other operator endpoints: behind EXTENDER_OPERATOR_TOKEN, off with EXTENDER_OPERATOR_API.
operator_router = APIRouter(tags=["extender"], responses=documented(400, 401, 413, 422, 503), route_class=BodyRoute)


def _scheduler(state: AppState) -> Scheduler:
    if state.scheduler is None:  # only before the lifespan has run
        raise HTTPException(status_code=503, detail="the extender is starting")
    return state.scheduler


def _domain_error(state: AppState, verb: str, answer: dict[str, Any]) -> None:
    if answer.get("Error"):
        state.metrics.errors.labels(verb, "domain").inc()


async def answer_filter(state: AppState, args: ExtenderArgs) -> dict[str, Any]:
    pod = translate.pod_info(args.Pod)
    names = translate.candidate_names(args)
    items = translate.whole_nodes(args)
    return await filter_pod(state, pod, args.Pod.metadata.resourceVersion or "", names, items)


async def filter_pod(
    state: AppState, pod: PodInfo, resource_version: str, names: list[str], items: list[Node] | None = None
) -> dict[str, Any]:
    """Filter's answer for a pod already read; ``items``: the candidates as node objects, if so sent."""
    scheduler = _scheduler(state)
    nodes = translate.node_facts(items) if items is not None else None
    outcome = await scheduler.filter(pod, resource_version, names, nodes)
    answer = translate.filter_answer(items, outcome)
    _domain_error(state, "filter", answer)
    return answer


async def answer_prioritize(state: AppState, args: ExtenderArgs) -> list[dict[str, Any]]:
    scheduler = _scheduler(state)
    names = translate.candidate_names(args)
    items = translate.whole_nodes(args)
    if items is None:
        meta = args.Pod.metadata
        pod = CyclePod(meta.uid, meta.resourceVersion or "", partial(translate.pod_info, args.Pod))
        scores = await scheduler.prioritize_in_cycle(pod, names)
    else:  # node objects in the request may be newer than any filter's snapshot: they refresh it
        scores = await scheduler.prioritize(translate.pod_info(args.Pod), names, translate.node_facts(items))
    return translate.prioritize_answer(scores)


async def _disconnected(receive: Receive, gone: asyncio.Event) -> None:
    """Set ``gone`` when the client hangs up (the body is already read, so the next message is
    ``http.disconnect``): kube-scheduler closes the connection when its ``httpTimeout`` passes."""
    while (await receive())["type"] != "http.disconnect":
        pass
    gone.set()


async def answer_bind(state: AppState, args: ExtenderBindingArgs, receive: Receive) -> dict[str, Any]:
    """``receive``: the request's, read for the client hanging up while a gang member is held."""
    scheduler = _scheduler(state)
    gone = asyncio.Event()
    watch = asyncio.create_task(_disconnected(receive, gone))
    try:
        error = await scheduler.bind(args.PodNamespace, args.PodName, args.PodUID, args.Node, gone)
    finally:
        watch.cancel()
    answer = translate.binding_answer(error)
    _domain_error(state, "bind", answer)
    return answer


@dataclass(frozen=True, slots=True)
class CycleVerb:
    """A verb kube-scheduler calls for every pod: its body's model and its answer."""

    body: type[BaseModel]
    answer: Callable[[AppState, Any, Receive], Awaitable[Any]]


# By path: app.middleware.hot_verbs answers these in front of FastAPI, with the same functions the
# routes call.
CYCLE_VERBS: dict[str, CycleVerb] = {
    "/filter": CycleVerb(ExtenderArgs, lambda state, args, _receive: answer_filter(state, args)),
    "/prioritize": CycleVerb(ExtenderArgs, lambda state, args, _receive: answer_prioritize(state, args)),
    "/bind": CycleVerb(ExtenderBindingArgs, answer_bind),
}


@router.post("/filter", response_model=ExtenderFilterResult, summary="Filter the candidate nodes for a pod")
async def filter_nodes(args: ExtenderArgs, request: Request) -> JSONAnswer:
    return JSONAnswer(await answer_filter(get_state(request), args))


@router.post("/prioritize", response_model=list[HostPriority], summary="Score the candidate nodes 0..10")
async def prioritize_nodes(args: ExtenderArgs, request: Request) -> JSONAnswer:
    return JSONAnswer(await answer_prioritize(get_state(request), args))


@router.post("/preempt", response_model=ExtenderPreemptionResult, summary="Choose nodes and victims for preemption")
async def preempt(args: ExtenderPreemptionArgs, request: Request) -> JSONAnswer:
    scheduler = _scheduler(get_state(request))
    pod = translate.pod_info(args.Pod)
    candidates, victim_pods = translate.preemption_candidates(args)
    return JSONAnswer(translate.preemption_answer(await scheduler.preempt(pod, candidates, victim_pods)))


@router.post("/bind", response_model=ExtenderBindingResult, summary="Bind a pod to a node (gang-aware)")
async def bind(args: ExtenderBindingArgs, request: Request) -> JSONAnswer:
    return JSONAnswer(await answer_bind(get_state(request), args, request.receive))


@operator_router.post("/v1/explain", summary="Every predicate's verdict and every priority's score, per node")
async def explain(args: ExplainArgs, request: Request) -> JSONAnswer:
    scheduler = _scheduler(get_state(request))
    names = list(args.NodeNames) if args.NodeNames is not None else None
    return JSONAnswer(await scheduler.explain(translate.pod_info(args.Pod), names))
