"""``python -m devstack.demo``: a gang placed through a real kube-scheduler, start to finish.

Starts etcd, kube-apiserver and kube-scheduler on loopback (binaries from ``KUBE_BIN_DIR`` or
``PATH``), Redis and two extender replicas registered with that scheduler; creates four nodes and
a PodGroup of four pods that only fit one per node; then prints where the pods landed, the
PodGroup's status and the Events the extender wrote. ``--json`` prints the same as one object.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from app.serving.embedded_redis import EmbeddedRedis, EmbeddedRedisError
from devstack import releases
from devstack.controlplane import ControlPlane, ControlPlaneError, find_binaries
from devstack.kube import Kube, install_podgroup_crd, resources, wait_for
from devstack.releases import Release, ReleaseUnavailable
from devstack.stack import Stack

NAMESPACE = "demo"
GANG = "trainer"
MEMBERS = 4
NODE_CPU = "4"
MEMBER_CPU = "3"  # more than half a node: the members can only go one per node
PODGROUPS = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{NAMESPACE}/podgroups"
COMPONENT = "kube-gang-extender"


class DemoError(RuntimeError):
    """The demo could not run or did not reach its end; the message says what to do."""


@contextlib.contextmanager
def _running(workdir: Path, release: Release | None) -> Iterator[tuple[ControlPlane, EmbeddedRedis]]:
    try:
        binaries, missing = find_binaries(release)
    except ReleaseUnavailable as exc:
        raise DemoError(str(exc)) from exc
    if missing:
        raise DemoError(
            f"missing {', '.join(missing)}: set KUBE_BIN_DIR to a directory holding kube-apiserver and "
            "kube-scheduler (v1.28 or newer); etcd may also come from PATH (Debian: etcd-server)"
        )
    try:
        redis = EmbeddedRedis().start()
    except EmbeddedRedisError as exc:
        raise DemoError(str(exc)) from exc
    plane = ControlPlane(workdir / "control-plane", binaries)
    try:
        plane.start()
        yield plane, redis
    except ControlPlaneError as exc:
        raise DemoError(f"the control plane did not start: {exc}") from exc
    finally:
        plane.stop()
        redis.stop()


def _create_gang(kube: Kube, scheduler: str) -> list[str]:
    kube.create(
        PODGROUPS,
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": GANG},
            "spec": {"minMember": MEMBERS},
        },
    )
    names = [f"{GANG}-{i}" for i in range(MEMBERS)]
    for name in names:
        body = kube.pod_body(
            name,
            scheduler=scheduler,
            requests=resources(cpu=MEMBER_CPU, memory="1Gi"),
            labels={"scheduling.x-k8s.io/pod-group": GANG},
        )
        kube.create_pod(NAMESPACE, body)
    return names


def _extender_events(kube: Kube) -> list[dict[str, Any]]:
    events = [e for e in kube.events(NAMESPACE) if (e.get("source") or {}).get("component") == COMPONENT]
    events.sort(key=lambda e: (e.get("firstTimestamp") or "", e["involvedObject"]["kind"] != "PodGroup"))
    return [
        {
            "object": f"{e['involvedObject']['kind']}/{e['involvedObject']['name']}",
            "type": e["type"],
            "reason": e["reason"],
            "count": e.get("count", 1),
            "message": e["message"],
        }
        for e in events
    ]


def run(workdir: Path, timeout: float = 120.0, keep: bool = False, release: Release | None = None) -> dict[str, Any]:
    """Run the scenario; the result is what ``--json`` prints. ``release``: the Kubernetes release
    to run (built when not at hand); None takes the binaries of KUBE_BIN_DIR or PATH."""
    started = time.monotonic()
    with _running(workdir, release) as (plane, redis):
        kube = Kube(plane.client())
        install_podgroup_crd(kube)
        kube.create_namespace(NAMESPACE)
        stack = Stack(plane, redis.url, workdir, replicas=2, env={"EXTENDER_LOG_LEVEL": "warning"})
        try:
            assert stack.balancer is not None
            nodes = [f"demo-node-{i}" for i in range(MEMBERS)]
            for i, name in enumerate(nodes):
                kube.create_node(name, cpu=NODE_CPU, labels={"topology.kubernetes.io/zone": f"zone-{'ab'[i % 2]}"})
            ready = time.monotonic()
            names = _create_gang(kube, stack.name)

            def placed() -> dict[str, str] | None:
                placement = kube.placement(NAMESPACE)
                return placement if all(placement.get(n) for n in names) else None

            try:
                placement = wait_for(placed, timeout, f"the {MEMBERS} members of {GANG} bound")
            except TimeoutError as exc:
                raise DemoError(f"{exc}\nplacement: {kube.placement(NAMESPACE)}\n{stack.logs()}") from None
            bound_after = time.monotonic() - ready

            def status() -> dict[str, Any] | None:
                got: dict[str, Any] = ((kube.get(f"{PODGROUPS}/{GANG}") or {}).get("status")) or {}
                return got if got.get("phase") == "Scheduled" else None

            def events() -> list[dict[str, Any]] | None:
                seen = _extender_events(kube)
                permitted = {e["object"] for e in seen if e["reason"] == "GangPermitted"}
                wanted = {f"PodGroup/{GANG}", *(f"Pod/{n}" for n in names)}
                return seen if wanted <= permitted else None

            try:
                group = wait_for(status, 30, "the PodGroup status Scheduled")
                written = wait_for(events, 30, "the extender's Events")
            except TimeoutError as exc:
                raise DemoError(f"{exc}\n{stack.logs()}") from None
            result: dict[str, Any] = {
                "scheduler": stack.name,
                "replicas": [r.url for r in stack.replicas],
                "extender_url": stack.balancer.url,
                "nodes": {name: {"cpu": NODE_CPU} for name in nodes},
                "gang": {
                    "podgroup": f"{NAMESPACE}/{GANG}",
                    "min_member": MEMBERS,
                    "member_cpu": MEMBER_CPU,
                    "members": names,
                },
                "placement": {n: placement[n] for n in names},
                "podgroup_status": group,
                "events": written,
                "seconds": {"to_bind": round(bound_after, 2), "total": round(time.monotonic() - started, 2)},
            }
            if keep:
                _hold(plane, stack, result)
            return result
        finally:
            stack.stop()


def _hold(plane: ControlPlane, stack: Stack, result: dict[str, Any]) -> None:
    print(render(result), flush=True)
    print(
        f"\nThe stack keeps running until Ctrl-C.\n  kubectl --kubeconfig {plane.kubeconfig} -n {NAMESPACE} "
        f"get pods,podgroups,events\n  curl {stack.replicas[0].url}/v1/gangs\n  curl {stack.replicas[0].url}/metrics",
        flush=True,
    )
    with contextlib.suppress(KeyboardInterrupt):
        signal.pause()


def render(result: dict[str, Any]) -> str:
    """The human-readable report."""
    gang = result["gang"]
    lines = [
        f"PodGroup {gang['podgroup']}: minMember {gang['min_member']}, {len(gang['members'])} pods of "
        f"{gang['member_cpu']} CPU on {len(result['nodes'])} nodes of {next(iter(result['nodes'].values()))['cpu']} "
        f"CPU, scheduled by kube-scheduler profile {result['scheduler']!r} through 2 extender replicas",
        "",
        f"Placement (all bound {result['seconds']['to_bind']} s after the pods were created):",
    ]
    lines += [f"  {pod:<12} -> {node}" for pod, node in result["placement"].items()]
    status = result["podgroup_status"]
    lines += [
        "",
        "PodGroup status:",
        "  " + "  ".join(f"{k} {status[k]}" for k in ("phase", "scheduled", "running", "failed") if k in status),
    ]
    if status.get("scheduleStartTime"):
        lines.append(f"  scheduleStartTime {status['scheduleStartTime']}")
    lines += ["", "Events written by the extender:"]
    width = max(len(e["object"]) for e in result["events"])
    for e in result["events"]:
        count = f" (x{e['count']})" if e["count"] > 1 else ""
        lines.append(f"  {e['object']:<{width}}  {e['type']:<7}  {e['reason']:<13}  {e['message']}{count}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devstack.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    parser.add_argument("--keep", action="store_true", help="leave the stack running until Ctrl-C")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the gang (default 120)")
    parser.add_argument(
        "--kube-version",
        metavar="VERSION",
        help="run this Kubernetes release (e.g. 1.37.2; built with scripts/kube-build.sh when not at hand) "
        "instead of the binaries in KUBE_BIN_DIR or on PATH",
    )
    args = parser.parse_args(argv)
    release = releases.select(args.kube_version)[0] if args.kube_version else None
    workdir = Path(tempfile.mkdtemp(prefix="gang-demo-"))
    if not args.json:
        print("Starting etcd, kube-apiserver, kube-scheduler, Redis and two extender replicas ...", flush=True)
    try:
        result = run(workdir, timeout=args.timeout, keep=args.keep, release=release)
    except DemoError as exc:
        print(f"demo failed: {exc}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if args.keep:
        return 0
    print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
