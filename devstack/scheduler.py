"""kube-scheduler processes on a control plane (``devstack.controlplane``), each with its own profile
and extender entries: the configuration the README recommends, written as YAML."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import yaml

from app.serving.embedded_redis import free_port
from devstack.controlplane import ControlPlane, Process, wait_ready


def scheduler_config(
    kubeconfig: Path,
    scheduler_name: str,
    extenders: Sequence[dict[str, Any]],
    *,
    percentage_of_nodes_to_score: int | None = None,
    qps: int = 500,
) -> dict[str, Any]:
    """A KubeSchedulerConfiguration with one profile named ``scheduler_name`` and ``extenders``."""
    config: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": qps, "burst": 2 * qps},
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": scheduler_name}],
        "extenders": list(extenders),
    }
    if percentage_of_nodes_to_score is not None:
        config["percentageOfNodesToScore"] = percentage_of_nodes_to_score
    return config


def extender_entries(
    url: str,
    *,
    filter_timeout: str = "5s",
    bind_timeout: str = "45s",
    managed_resources: Sequence[str] = (),
    tls: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The entries the README recommends: filter/prioritize/preempt with a short timeout, bind with
    one longer than the gang window, and -- for ``managed_resources`` -- a third entry with no verbs
    that only declares them ignoredByScheduler (an entry with managedResources is called only for
    pods that request one of them, and gang members that do not must still reach the first two)."""
    fast: dict[str, Any] = {
        "urlPrefix": url,
        "filterVerb": "filter",
        "prioritizeVerb": "prioritize",
        "preemptVerb": "preempt",
        "weight": 1,
        "nodeCacheCapable": True,
        "httpTimeout": filter_timeout,
        "ignorable": False,
    }
    bind: dict[str, Any] = {"urlPrefix": url, "bindVerb": "bind", "nodeCacheCapable": True, "httpTimeout": bind_timeout}
    entries = [fast, bind]
    if managed_resources:
        entries.append(
            {"urlPrefix": url, "managedResources": [{"name": r, "ignoredByScheduler": True} for r in managed_resources]}
        )
    if tls is not None:
        for entry in entries:
            entry["enableHTTPS"] = True
            entry["tlsConfig"] = tls
    return entries


class KubeScheduler:
    """One kube-scheduler process with its own profile name; pods opt in with ``schedulerName``."""

    def __init__(
        self,
        plane: ControlPlane,
        scheduler_name: str,
        extenders: Sequence[dict[str, Any]],
        workdir: Path,
        *,
        verbosity: int = 2,
        percentage_of_nodes_to_score: int | None = None,
        qps: int = 500,
        config: dict[str, Any] | None = None,
        feature_gates: str | None = None,
    ) -> None:
        """``config``: a whole KubeSchedulerConfiguration to run instead of the one built from the
        other arguments (a rendered deploy/ overlay); ``feature_gates``: other gates than the plane's."""
        self.feature_gates = plane.feature_gates if feature_gates is None else feature_gates
        self.plane = plane
        self.name = scheduler_name
        workdir.mkdir(parents=True, exist_ok=True)
        self.config_path = workdir / f"{scheduler_name}.yaml"
        if config is None:
            config = scheduler_config(
                plane.kubeconfig,
                scheduler_name,
                extenders,
                percentage_of_nodes_to_score=percentage_of_nodes_to_score,
                qps=qps,
            )
        self.config_path.write_text(yaml.safe_dump(config))
        self.workdir = workdir
        self.verbosity = verbosity
        self.port = free_port()
        self.process = self._start()

    def _start(self) -> Process:
        cert_dir = self.workdir / f"{self.name}-certs"
        cert_dir.mkdir(exist_ok=True)
        process = Process(
            f"kube-scheduler-{self.name}",
            [
                self.plane.binaries["kube-scheduler"],
                "--config",
                str(self.config_path),
                "--bind-address",
                "127.0.0.1",
                "--secure-port",
                str(self.port),
                "--cert-dir",
                str(cert_dir),
                f"--v={self.verbosity}",
                *([f"--feature-gates={self.feature_gates}"] if self.feature_gates else []),
            ],
            self.workdir,
        )
        wait_ready(self._healthy, f"kube-scheduler {self.name}", process, 60)
        return process

    def restart(self) -> None:
        """Stop the process (SIGTERM: its extender calls in flight are cut off) and start a new one
        with the same configuration; the log goes on in the same file."""
        self.process.stop()
        self.process = self._start()

    def _healthy(self) -> bool:
        resp = httpx.get(f"https://127.0.0.1:{self.port}/healthz", verify=False, timeout=2)
        return resp.status_code == 200

    def log(self, tail: int | None = 12000) -> str:
        return self.process.log(tail)

    def stop(self) -> None:
        self.process.stop()
