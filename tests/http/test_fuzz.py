"""Schemathesis over every operation of the served OpenAPI document, against a real replica process
with a real Redis and a seeded snapshot: no answer may be a 5xx, and every answer must be one the
document describes (status code, content type, headers, body schema), with invalid requests refused.

``EXTENDER_FUZZ_EXAMPLES`` sets the cases generated per operation and generation mode (positive, and
negative for operations that take a body); the default keeps CI within its budget.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis.asyncio as aredis
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import APIOperation, GenerationMode, Response
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from extenders.sync.store import Store
from tests.fake_kube.builders import make_pod
from tests.gang_support import gpu_node, member, seed
from tests.plugins.servers import ServerProcess

# About 40 s idle; the whole suite runs it beside three control planes on two cores, where the same
# cases took four times as long and the default 180 s (setup included) was not enough.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

Case = schemathesis.Case[Any]

FUZZ_EXAMPLES = int(os.environ.get("EXTENDER_FUZZ_EXAMPLES", "40"))
NODES = ["fz-n1", "fz-n2", "fz-n3"]


def _with_uid(pod: dict[str, Any]) -> dict[str, Any]:
    pod["metadata"]["uid"] = str(uuid.uuid4())
    return pod


PENDING = _with_uid(make_pod("plain", namespace="fz", cpu="100m"))  # the pod a substituted bind names
VICTIM = _with_uid(make_pod("victim", namespace="fz", cpu="1", node_name="fz-n1"))
GANG = ("fz", "train")
# positive_data_acceptance is not among them: JSON Schema cannot say what the API's own validation
# says (a quantity's grammar, int32 fields refusing 1.0, a selector's operator-dependent values),
# so schema-valid bodies the API server would refuse are refused here too, with a 422.
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
]


@dataclass
class Tally:
    """Every case sent, per operation and mode; the first failure of each check, with a curl line."""

    cases: dict[str, int] = field(default_factory=dict)
    statuses: dict[int, int] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)

    def total(self) -> int:
        return sum(self.cases.values())


@pytest.fixture(scope="module")
def fuzzed(redis_url: str) -> Iterator[ServerProcess]:
    """One replica in standalone mode over a Redis seeded with three nodes, a bound pod, a pending
    plain pod and a gang of two, so generated requests reach the engine, not only the parsers."""
    prefix = f"fuzz{uuid.uuid4().hex[:8]}"

    async def seeded() -> None:
        client = aredis.Redis.from_url(redis_url)
        try:
            gang = [member(f"w-{i}", GANG[1], 2, namespace=GANG[0]) for i in range(2)]
            await seed(Store(client, prefix), [gpu_node(n, gpus=4) for n in NODES], [VICTIM, PENDING, *gang])
        finally:
            await client.aclose()

    asyncio.run(seeded())
    env = {
        "EXTENDER_REDIS_URL": redis_url,
        "EXTENDER_REDIS_PREFIX": prefix,
        "EXTENDER_KUBE_MODE": "off",
        "EXTENDER_GANG_WINDOW_SECONDS": "1",
    }
    server = ServerProcess(env, "fuzz")
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def substitute(case: Case, names: list[str]) -> None:
    """Point a generated request at what the snapshot holds (its nodes, a pending pod, the gang)."""
    body, path = case.body, case.operation.path
    if isinstance(body, dict):
        if path in ("/filter", "/prioritize", "/v1/explain"):
            body["NodeNames"] = list(names)
        elif path == "/preempt":
            victim: dict[str, Any] = {"Pods": [{"UID": VICTIM["metadata"]["uid"]}], "NumPDBViolations": 0}
            body["NodeNameToMetaVictims"] = {n: victim for n in names}
            body.pop("NodeNameToVictims", None)
        elif path == "/bind" and names:
            meta = PENDING["metadata"]
            body.update(PodName=meta["name"], PodNamespace=meta["namespace"], PodUID=meta["uid"], Node=names[0])
    if path == "/v1/nodes/{name}" and names and case.path_parameters is not None:
        case.path_parameters["name"] = names[0]
    if path == "/v1/gangs/{namespace}/{name}" and case.path_parameters is not None:
        case.path_parameters.update(namespace=GANG[0], name=GANG[1])


def fuzz_operation(
    operation: APIOperation[Any, Any, Any, Any], mode: GenerationMode, send: Callable[[Case], Response], tally: Tally
) -> None:
    label = f"{operation.label} [{mode.value}]"
    strategy = operation.as_strategy(generation_mode=mode)
    names = st.lists(st.sampled_from([*NODES, "ghost"]), max_size=4)

    @settings(
        max_examples=FUZZ_EXAMPLES,
        deadline=None,
        database=None,
        derandomize=False,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.generate],
    )
    @given(case=strategy, swap=st.booleans(), nodes=names)
    def run(case: Case, swap: bool, nodes: list[str]) -> None:
        if swap and mode is GenerationMode.POSITIVE:
            substitute(case, nodes)
        response = send(case)
        tally.cases[label] = tally.cases.get(label, 0) + 1
        tally.statuses[response.status_code] = tally.statuses.get(response.status_code, 0) + 1
        try:
            case.validate_response(response, checks=CHECKS)
        except (AssertionError, BaseExceptionGroup) as exc:
            first = exc.exceptions[0] if isinstance(exc, BaseExceptionGroup) else exc
            key = f"{label}: {type(first).__name__}: {str(first).splitlines()[0] if str(first) else ''}"
            if key not in tally.failures:
                tally.failures[key] = f"{response.status_code} {response.text[:300]}\n{case.as_curl_command()[:2000]}"

    run()


def test_every_operation_answers_within_the_document_and_never_5xx(fuzzed: ServerProcess) -> None:
    schema = schemathesis.openapi.from_url(f"{fuzzed.url}/openapi.json")
    tally = Tally()
    session = requests.Session()

    def send(case: Case) -> Response:
        return case.call(base_url=fuzzed.url, session=session, timeout=60)

    operations = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), f"the served document has an operation schemathesis cannot read: {result}"
        operations.append(result.ok())
    assert {op.label for op in operations} >= {
        "POST /filter",
        "POST /prioritize",
        "POST /preempt",
        "POST /bind",
        "POST /v1/explain",
        "GET /v1/nodes/{name}",
        "GET /v1/gangs/{namespace}/{name}",
    }
    for operation in operations:
        fuzz_operation(operation, GenerationMode.POSITIVE, send, tally)
        if operation.body:  # a string path parameter has no invalid values to generate
            fuzz_operation(operation, GenerationMode.NEGATIVE, send, tally)
    print(f"fuzz: {tally.total()} cases over {len(operations)} operations; statuses {sorted(tally.statuses.items())}")
    assert not tally.failures, "\n\n".join(f"{key}\n{example}" for key, example in tally.failures.items())
    assert not any(code >= 500 for code in tally.statuses)
    # Every operation was reached, and both valid and invalid bodies were answered.
    assert len(tally.cases) >= len(operations) and tally.total() >= len(operations) * min(FUZZ_EXAMPLES, 5)
    assert tally.statuses.get(200, 0) > 0 and tally.statuses.get(422, 0) > 0
    assert fuzzed.get("/healthz").status_code == 200
    log = fuzzed.log()
    assert "Traceback" not in log, log
