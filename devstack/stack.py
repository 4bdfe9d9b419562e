"""Our replicas behind a balancer, registered as extenders of their own kube-scheduler.

Each stack has its own scheduler name (pods opt in with ``schedulerName``, as with a second
scheduler profile in production) and its own Redis key prefix, so several stacks can share one
control plane without scheduling each other's pods.
"""

from __future__ import annotations

import contextlib
import secrets
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import yaml

from app.serving.embedded_redis import EmbeddedRedis, free_port
from devstack import http_client
from devstack.balancer import Balancer
from devstack.controlplane import ControlPlane, running_control_plane
from devstack.kube import Kube, wait_for
from devstack.metrics import sample_total
from devstack.replica import REPO, ServerProcess
from devstack.scheduler import KubeScheduler, extender_entries
from devstack.tls import MutualTLS


class Stack:
    def __init__(
        self,
        plane: ControlPlane,
        redis_url: str,
        workdir: Path,
        *,
        replicas: int = 2,
        env: Mapping[str, str] | None = None,
        managed_resources: Sequence[str] = (),
        filter_timeout: str = "5s",
        bind_timeout: str = "45s",
        scheduler_verbosity: int = 2,
        percentage_of_nodes_to_score: int | None = None,
        tls: MutualTLS | None = None,
        with_scheduler: bool = True,
        scheduler_feature_gates: str | None = None,
        tree: Path | None = None,
    ) -> None:
        """``tls``: the replicas serve mutual TLS (each with a plain-HTTP health port for the waits)
        and kube-scheduler calls them with ``enableHTTPS`` and that ``tlsConfig``, through the
        balancer (a TCP proxy: TLS passes through it). ``with_scheduler=False``: no kube-scheduler
        of the stack's own (a test brings one with its own configuration). ``scheduler_feature_gates``:
        its kube-scheduler's, when not the control plane's. ``tree``: another checkout whose code the
        replicas run (benchmarks comparing two trees)."""
        self.plane = plane
        self.tls = tls
        self.tree = tree
        self.name = f"gang-{secrets.token_hex(3)}"
        self.workdir = workdir / self.name
        self.workdir.mkdir(parents=True, exist_ok=True)
        kubeconfig = self.workdir / "extender.kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(plane.kubeconfig_document(plane.extender_token)))
        self.env = {
            "EXTENDER_REDIS_URL": redis_url,
            "EXTENDER_REDIS_PREFIX": self.name,
            "EXTENDER_KUBE_MODE": "on",
            "KUBECONFIG": str(kubeconfig),
            "EXTENDER_LEASE_SECONDS": "5",
            **(tls.replica_env() if tls is not None else {}),
            **(env or {}),
        }
        self.replicas: list[ServerProcess] = []
        self.balancer: Balancer | None = None
        self.scheduler: KubeScheduler | None = None
        try:
            for i in range(replicas):
                self.replicas.append(self._replica(f"{self.name}-r{i + 1}"))
            for replica in self.replicas:
                replica.wait_ready(60)
            self.balancer = Balancer([("127.0.0.1", r.port) for r in self.replicas])
            self.url = self.balancer.url if tls is None else f"https://127.0.0.1:{self.balancer.port}"
            if not with_scheduler:
                return
            entries = extender_entries(
                self.url,
                filter_timeout=filter_timeout,
                bind_timeout=bind_timeout,
                managed_resources=managed_resources,
                tls=tls.scheduler_tls_config() if tls is not None else None,
            )
            self.scheduler = KubeScheduler(
                plane,
                self.name,
                entries,
                self.workdir,
                verbosity=scheduler_verbosity,
                percentage_of_nodes_to_score=percentage_of_nodes_to_score,
                feature_gates=scheduler_feature_gates,
            )
        except BaseException:
            self.stop()
            raise

    def _replica(self, name: str, port: int | None = None, health_port: int | None = None) -> ServerProcess:
        tree = self.tree or REPO
        if self.tls is None:
            return ServerProcess(self.env, name, port=port, tree=tree)
        return ServerProcess(
            self.env,
            name,
            port=port,
            health_port=health_port or free_port(),
            client_tls=self.tls.client_context(),
            tree=tree,
        )

    def restart_replica(self, index: int) -> ServerProcess:
        """Start a fresh process in place of replica ``index`` on the same port (the balancer's backend)."""
        old = self.replicas[index]
        old.stop()
        fresh = self._replica(old.name, port=old.port, health_port=old.health_port)
        fresh.wait_ready(60)
        self.replicas[index] = fresh
        return fresh

    def logs(self, whole: bool = False) -> str:
        """Each replica's log and kube-scheduler's, under a ``--- name`` line: their tails, or all."""
        parts = [f"--- {r.name}\n{r.log(None) if whole else r.log()}" for r in self.replicas]
        if self.scheduler is not None:
            parts.append(f"--- kube-scheduler\n{self.scheduler.log(None) if whole else self.scheduler.log()}")
        return "\n".join(parts)

    def leader_index(self, timeout: float = 30) -> int:
        """The index of the replica leading the watch, once exactly one does."""

        def one_leader() -> list[int] | None:
            leading = [i for i, r in enumerate(self.replicas) if r.readiness().get("is_leader") is True]
            return leading if len(leading) == 1 else None

        return wait_for(one_leader, timeout, "exactly one replica leads the watch")[0]

    def requests(self, verb: str) -> int:
        """How many ``verb`` calls the live replicas answered (from their /metrics)."""
        return int(self.metric("extender_requests_total", verb=verb))

    def server_seconds(self, verb: str) -> float:
        """Server-side seconds the live replicas spent answering ``verb`` (their latency histogram's sum)."""
        return self.metric("extender_request_duration_seconds_sum", verb=verb)

    def metric(self, sample_name: str, **labels: str) -> float:
        """A sample summed over the live replicas' /metrics, over the series that carry ``labels``."""
        total = 0.0
        for replica in self.replicas:
            if replica.proc.poll() is not None:
                continue
            total += sample_total(replica.get("/metrics").text, sample_name, **labels)
        return total

    def stop(self) -> None:
        if self.scheduler is not None:
            self.scheduler.stop()
        if self.balancer is not None:
            self.balancer.stop()
        for replica in self.replicas:
            replica.stop()


@contextlib.contextmanager
def running_stack(
    nodes: int, node_cpu: int, memory: str = "64Gi", *, replicas: int = 2
) -> Iterator[tuple[Kube, Stack]]:
    """A control plane, a private Redis and a stack of ``replicas`` with ``nodes`` nodes its snapshot
    already has (``bench-0000``...), for a ``with`` block (the end-to-end benchmarks)."""
    with tempfile.TemporaryDirectory() as tmp, running_control_plane(Path(tmp) / "cp") as plane:
        redis = EmbeddedRedis().start()
        client = plane.client(timeout=60)
        stack: Stack | None = None
        try:
            kube = Kube(client)
            stack = Stack(plane, redis.url, Path(tmp), replicas=replicas)
            for i in range(nodes):
                kube.create_node(f"bench-{i:04d}", cpu=str(node_cpu), memory=memory)
            url = stack.replicas[0].url
            wait_for(
                lambda: len(http_client.get(f"{url}/v1/nodes", timeout=10).json()["nodes"]) >= nodes,
                60,
                "the snapshot has the nodes",
            )
            yield kube, stack
        finally:
            if stack is not None:
                stack.stop()
            client.close()
            redis.stop()
