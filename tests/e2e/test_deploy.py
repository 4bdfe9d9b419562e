"""deploy/ and the registration examples against the real API server and kube-scheduler.

Every kustomize overlay is rendered with ``kubectl kustomize`` and applied with a server-side dry
run, so the API server's validation and admission (RBAC escalation checks, Pod Security) judge it.
The second-scheduler overlay's kube-scheduler then runs with its rendered configuration and as its
rendered ServiceAccount (its RBAC applied for real), and the registration examples each start
kube-scheduler and schedule through our replicas. What a test replaces is only what differs on
loopback: the extender's address, file paths and the kubeconfig.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devstack.controlplane import ControlPlane
from devstack.kube import Kube, resources, wait_for
from devstack.releases import NEWEST
from devstack.replica import REPO
from devstack.scheduler import KubeScheduler
from devstack.stack import Stack
from devstack.tls import MutualTLS
from tests.e2e.conftest import StartStack
from tests.e2e.test_gangs import legacy

pytestmark = [pytest.mark.e2e, pytest.mark.every_release]

OVERLAYS = sorted(p.parent.name for p in (REPO / "deploy" / "overlays").glob("*/kustomization.yaml"))
NAMESPACE = "kube-gang-extender"
SCHEDULER = "gang-scheduler"


def kubectl(*args: str, kubeconfig: Path | None = None, stdin: str | None = None) -> tuple[str, str]:
    """stdout and stderr (where kubectl prints the API server's warnings) of a command that succeeded."""
    binary = shutil.which(os.environ.get("KUBECTL", "kubectl"))
    if binary is None:
        pytest.fail("kubectl (1.27 or newer, for kustomize components) is needed to render deploy/", pytrace=False)
    command = [binary, *args] + ([f"--kubeconfig={kubeconfig}"] if kubeconfig else [])
    done = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout, done.stderr


def render(overlay: str) -> list[dict[str, Any]]:
    text, _ = kubectl("kustomize", str(REPO / "deploy" / "overlays" / overlay))
    return [doc for doc in yaml.safe_load_all(text) if doc]


def dump(docs: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(docs)


def create_namespace(kube: Kube, docs: list[dict[str, Any]]) -> None:
    """The overlay's namespace for real, with its labels (Pod Security admission reads them)."""
    (namespace,) = [d for d in docs if d["kind"] == "Namespace"]
    assert namespace["metadata"]["name"] == NAMESPACE
    kube.create_namespace(NAMESPACE, labels=namespace["metadata"]["labels"])


@pytest.fixture(scope="module")
def plain_stack(stack_factory: StartStack) -> Stack:
    return stack_factory(with_scheduler=False)


@pytest.fixture(scope="module")
def mutual_tls(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> MutualTLS:
    return MutualTLS.issue(control_plane, tmp_path_factory.mktemp("deploy-tls"))


@pytest.fixture(scope="module")
def tls_stack(stack_factory: StartStack, mutual_tls: MutualTLS) -> Stack:
    return stack_factory(tls=mutual_tls, with_scheduler=False)


class Workload:
    """Nodes and pods of one test, scheduled by ``gang-scheduler``; all removed afterwards."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.namespace = f"e2e-deploy-{secrets.token_hex(3)}"
        kube.create_namespace(self.namespace)
        self.nodes: list[str] = []

    def node(self, **kwargs: Any) -> str:
        name = f"{self.namespace}-n{len(self.nodes)}"
        self.kube.create_node(name, **kwargs)
        self.nodes.append(name)
        return name

    def pod(self, name: str, **kwargs: Any) -> None:
        self.kube.create_pod(self.namespace, self.kube.pod_body(name, scheduler=SCHEDULER, **kwargs))

    def wait_bound(self, names: list[str], scheduler: KubeScheduler, stack: Stack) -> dict[str, str]:
        def check() -> dict[str, str] | None:
            placed = self.kube.placement(self.namespace)
            return placed if all(placed.get(n) for n in names) else None

        try:
            return wait_for(check, 60, f"pods {names} bound by {SCHEDULER}")
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n{scheduler.log()}\n{stack.logs()}") from None

    def cleanup(self) -> None:
        self.kube.delete_namespace_pods(self.namespace)
        for name in self.nodes:
            self.kube.delete_node(name)


@pytest.fixture
def workload(kube: Kube) -> Iterator[Workload]:
    w = Workload(kube)
    yield w
    w.cleanup()


def aim_at(config: dict[str, Any], stack: Stack, kubeconfig: Path, tls: MutualTLS | None) -> dict[str, Any]:
    """The configuration with loopback's address, files and kubeconfig; every other field as written."""
    files = {}
    if tls is not None:
        files = {"ca.crt": tls.server_ca_file, "tls.crt": tls.client_cert_file, "tls.key": tls.client_key_file}
    config["clientConnection"]["kubeconfig"] = str(kubeconfig)
    for entry in config["extenders"]:
        entry["urlPrefix"] = stack.url
        for field, path in (entry.get("tlsConfig") or {}).items():
            entry["tlsConfig"][field] = str(files[Path(path).name])
    return config


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_overlay_renders_and_the_api_server_accepts_it(
    overlay: str, control_plane: ControlPlane, kube: Kube
) -> None:
    docs = render(overlay)
    kinds = {d["kind"] for d in docs}
    assert {"Namespace", "Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy", "ClusterRole"} <= kinds
    # A dry run creates nothing, the namespace included, and namespaced objects need theirs to exist.
    create_namespace(kube, docs)
    labels = (kube.get(f"/api/v1/namespaces/{NAMESPACE}") or {})["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    out, warnings = kubectl(
        "apply", "--dry-run=server", "-f", "-", kubeconfig=control_plane.kubeconfig, stdin=dump(docs)
    )
    assert "PodSecurity" not in warnings, warnings
    for doc in docs:
        kind, name = doc["kind"].lower(), doc["metadata"]["name"]
        assert any(kind in line and f"/{name} " in line and "(server dry run)" in line for line in out.splitlines()), (
            f"{kind}/{name} missing from:\n{out}"
        )
    assert kube.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/kube-gang-extender") is None


def scheduler_token(kube: Kube) -> str:
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}
    answer = kube.create(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{SCHEDULER}/token", request)
    token: str = answer["status"]["token"]
    return token


def test_the_second_scheduler_runs_its_rendered_configuration_as_its_own_account(
    control_plane: ControlPlane,
    kube: Kube,
    tls_stack: Stack,
    mutual_tls: MutualTLS,
    workload: Workload,
    tmp_path: Path,
) -> None:
    docs = render("second-scheduler")
    create_namespace(kube, docs)
    identity = [
        d
        for d in docs
        if d["kind"] in ("ServiceAccount", "Role", "RoleBinding", "ClusterRoleBinding")
        and d["metadata"]["name"].startswith(SCHEDULER)
    ]
    assert {d["kind"] for d in identity} == {"ServiceAccount", "Role", "RoleBinding", "ClusterRoleBinding"}
    kubectl("apply", "-f", "-", kubeconfig=control_plane.kubeconfig, stdin=dump(identity))
    kubeconfig = tmp_path / "gang-scheduler.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(control_plane.kubeconfig_document(scheduler_token(kube))))

    (config_map,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith(SCHEDULER)]
    config = yaml.safe_load(config_map["data"]["config.yaml"])
    assert [p["schedulerName"] for p in config["profiles"]] == [SCHEDULER]
    (deployment,) = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == SCHEDULER]
    template = deployment["spec"]["template"]
    assert template["metadata"]["labels"]["kube-gang-extender.io/extender-client"] == "true"
    # The release the overlay deploys by default is the newest the project is tested against; the one
    # running here is the release under test, with the same rendered configuration.
    assert template["spec"]["containers"][0]["image"] == f"registry.k8s.io/kube-scheduler:v{NEWEST.version}"
    assert template["spec"]["volumes"][0]["configMap"]["name"] == config_map["metadata"]["name"]

    scheduler = KubeScheduler(
        control_plane, SCHEDULER, [], tmp_path, config=aim_at(config, tls_stack, kubeconfig, mutual_tls)
    )
    try:
        lease = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/{SCHEDULER}"
        wait_for(
            lambda: ((kube.get(lease) or {}).get("spec") or {}).get("holderIdentity"),
            30,
            "gang-scheduler leads through its own lease",
        )
        for _ in range(2):
            workload.node(cpu="4")
        filters_before = tls_stack.requests("filter")
        workload.pod("plain", requests=resources(cpu="500m"))
        gang = [f"pair-{i}" for i in range(2)]
        for name in gang:
            workload.pod(name, requests=resources(cpu="3"), labels=legacy("pair", 2))
        placed = workload.wait_bound(["plain", *gang], scheduler, tls_stack)
        assert placed[gang[0]] != placed[gang[1]], "each member needs 3 of a node's 4 CPUs"
        assert tls_stack.requests("filter") > filters_before
    finally:
        scheduler.stop()


@pytest.mark.parametrize("example", ["scheduler-config.yaml", "managed-resources.yaml", "mutual-tls.yaml"])
def test_kube_scheduler_runs_each_registration_example(
    example: str,
    control_plane: ControlPlane,
    request: pytest.FixtureRequest,
    mutual_tls: MutualTLS,
    workload: Workload,
    tmp_path: Path,
) -> None:
    tls = example == "mutual-tls.yaml"
    stack: Stack = request.getfixturevalue("tls_stack" if tls else "plain_stack")
    config = yaml.safe_load((REPO / "examples" / "registration" / example).read_text())
    # Its own lease per run: a stopped scheduler's lease would otherwise hold the next one back.
    config["leaderElection"]["resourceName"] = f"{SCHEDULER}-{secrets.token_hex(3)}"
    config = aim_at(config, stack, control_plane.kubeconfig, mutual_tls if tls else None)
    scheduler = KubeScheduler(control_plane, SCHEDULER, [], tmp_path, config=config)
    try:
        managed = example == "managed-resources.yaml"
        workload.node(cpu="4", extended={"example.com/gpu": "2"} if managed else None)
        binds_before = stack.requests("bind")
        extra = {"example.com/gpu": "1"} if managed else {}
        workload.pod("p", requests=resources(cpu="1", **extra))
        workload.wait_bound(["p"], scheduler, stack)
        assert stack.requests("bind") == binds_before + 1, "the extender bound the pod"
    finally:
        scheduler.stop()
