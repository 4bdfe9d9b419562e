"""Where a replica's CPU goes under load: folded py-spy stacks sorted into the request path's stages.

Reads the files ``bench_e2e_throughput --profile DIR`` writes (one per replica, ``stack count`` lines)
and the benchmark's JSON (for each replica's CPU per pod). A sample goes to the first stage whose
frame appears in its stack, innermost frames first; a Redis or API call made by a stage counts in
that stage, and only samples outside every stage go to their caller (Redis client, ASGI...).
Samples of the event loop's own native code (socket reads and writes in uvloop, HTTP parsing in
httptools) have no Python frame below the loop and count as "event loop".

Usage: python bench/profile_summary.py RESULT.json [--markdown]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

# (stage, frame-name fragments): the first fragment found in a stack, innermost first, names its stage.
# The work a request does, by stage; then, for samples outside every stage, who spent them.
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("request parse (pydantic, pod conversion)", ("model_validate_json", "translate.py", "JsonBodyMiddleware")),
    ("snapshot catch-up (Redis round trip, decode, apply)", ("SnapshotCache.", "SnapshotReader.")),
    ("bind: reservation (Lua)", ("Binder.reserve", "Reservations.")),
    ("bind: Binding POST to the API server", ("Binder.api_bind", "KubeClient.bind_pod")),
    ("bind: checks, gang bookkeeping", ("Binder.", "BindService.", "Scheduler.bind")),
    ("filter: plug-ins", ("filter_nodes", "without_own_reservation")),
    ("filter: gang rules, refusals", ("Scheduler.filter", "GangService", "GangRules")),
    ("prioritize (computed ahead)", ("Scheduler._score_ahead", "Scheduler._score", "prioritize_values")),
    ("prioritize: answer", ("answer_prioritize", "Scheduler.prioritize")),
    ("preempt", ("preempt",)),
    ("watch ingestion (leader)", ("Watcher.", "Reflector.", "KubeClient.watch")),
)
CALLERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("response write", ("RequestResponseCycle.send", "render (app/responses.py")),
    ("ASGI and middleware", ("run_asgi", "Middleware", "HttpToolsProtocol")),
    ("metrics, logs", ("prometheus_client", "logging/", "extenders/logs.py")),
    ("Redis client (other callers)", ("redis/",)),
    ("Kubernetes client (other callers)", ("aiohttp/", "httpx/")),
)
LOOP = "event loop (native socket I/O, HTTP parsing)"
OTHER = "other"


def stage_of(frames: list[str]) -> str:
    for rules in (STAGES, CALLERS):
        for frame in reversed(frames):
            for stage, fragments in rules:
                if any(fragment in frame for fragment in fragments):
                    return stage
    if frames and frames[-1].startswith("Runner.run"):
        return LOOP
    return OTHER


def summarise(folded: Path) -> Counter[str]:
    counts: Counter[str] = Counter()
    for line in folded.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if stack:
            counts[stage_of(stack.split(";"))] += int(n)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("result", type=Path, help="the JSON bench_e2e_throughput --profile printed")
    parser.add_argument("--markdown", action="store_true", help="print a table instead of JSON")
    args = parser.parse_args()
    result = json.loads(args.result.read_text())
    phase = result["with_extender"]
    pods = result["pods"]
    table: dict[str, dict[str, float]] = {}
    for label, path in phase["profile_files"].items():
        counts = summarise(Path(path))
        total = sum(counts.values()) or 1
        cpu = phase["cpu_ms_per_pod"][label]
        table[label] = {stage: round(cpu * n / total, 3) for stage, n in counts.most_common()}
        table[label]["(samples)"] = total
    if not args.markdown:
        print(json.dumps({"pods": pods, "nodes": result["nodes"], "ms_per_pod_by_stage": table}, indent=2))
        return
    labels = list(table)
    stages = [s for s, _ in (*STAGES, *CALLERS)] + [LOOP, OTHER]
    print("| stage | " + " | ".join(f"{label}, ms/pod" for label in labels) + " |")
    print("| --- |" + " --- |" * len(labels))
    for stage in stages:
        if any(table[label].get(stage) for label in labels):
            print(f"| {stage} | " + " | ".join(f"{table[label].get(stage, 0):.2f}" for label in labels) + " |")
    totals = " | ".join(f"**{phase['cpu_ms_per_pod'][label]:.2f}**" for label in labels)
    print(f"| all (CPU per pod, /proc) | {totals} |")


if __name__ == "__main__":
    main()
