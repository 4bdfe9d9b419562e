"""docker-compose.yml stays a stack that runs: valid for compose itself, and built the way
scripts/compose-standin.sh and the users run it (the stack itself runs in that script, not here)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
STANDIN = REPO / "scripts" / "compose-standin.sh"
BALANCER = "http://balancer:8888"


def _compose() -> dict[str, Any]:
    data = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def _services() -> dict[str, dict[str, Any]]:
    services: dict[str, dict[str, Any]] = _compose()["services"]
    return services


def _replicas() -> list[str]:
    return [name for name, svc in _services().items() if "EXTENDER_REDIS_URL" in (svc.get("environment") or {})]


def _flags(service: dict[str, Any]) -> dict[str, str]:
    flags = {}
    for arg in service.get("command") or []:
        key, _, value = str(arg).partition("=")
        flags[key] = value
    return flags


def test_compose_accepts_the_file() -> None:
    """Compose's own schema check, with Debian's docker-compose 1.29 (scripts/bootstrap.sh --test
    installs it): no top-level name, only features 1.29 knows."""
    compose = shutil.which("docker-compose")
    assert compose is not None, "docker-compose is missing: scripts/bootstrap.sh --test installs it"
    result = subprocess.run(
        [compose, "-f", "docker-compose.yml", "config", "-q"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "name" not in _compose()


def test_two_replicas_of_the_production_image_run_read_only_with_distinct_ids() -> None:
    services = _services()
    replicas = _replicas()
    assert len(replicas) >= 2
    assert len({services[r]["environment"]["EXTENDER_REPLICA_ID"] for r in replicas}) == len(replicas)
    for name in replicas:
        svc = services[name]
        assert svc["build"]["target"] == "runtime"
        assert svc["read_only"] is True
        env = svc["environment"]
        assert env["EXTENDER_KUBE_MODE"] == "on"
        assert env["EXTENDER_REDIS_URL"].startswith("redis://redis:")
        assert env["KUBECONFIG"] == "/pki/extender.kubeconfig"


def test_the_api_server_enforces_rbac_and_authenticates_everyone() -> None:
    flags = _flags(_services()["kube-apiserver"])
    modes = flags["--authorization-mode"].split(",")
    assert "RBAC" in modes and "AlwaysAllow" not in modes
    assert flags["--anonymous-auth"] == "false"
    assert flags["--client-ca-file"] and flags["--tls-cert-file"]


def test_healthchecks_probe_what_they_guard() -> None:
    services = _services()
    for name, svc in services.items():
        for dependency, condition in (svc.get("depends_on") or {}).items():
            if condition["condition"] == "service_healthy":
                assert "healthcheck" in services[dependency], f"{name} waits for {dependency}, which has no healthcheck"
    for name, svc in services.items():
        test = (svc.get("healthcheck") or {}).get("test")
        if test is None:
            continue
        words = " ".join(test)
        assert "--version" not in words and test[0] == "CMD", f"{name}: {test}"
    # The official control-plane images have no shell or HTTP client: their probes run elsewhere.
    probes = {name: " ".join(svc["healthcheck"]["test"]) for name, svc in services.items() if "healthcheck" in svc}
    assert "https://kube-apiserver:6443/readyz" in probes["cluster-setup"]
    assert "https://kube-scheduler:10259/healthz" in probes["scheduler-ready"]
    assert "healthcheck" not in services["kube-apiserver"] and "healthcheck" not in services["kube-scheduler"]
    assert "/readyz" in probes[_replicas()[0]]
    assert "/healthz" in probes["balancer"]


def test_every_image_pulled_is_built_by_the_standin_script() -> None:
    script = STANDIN.read_text()
    standins = set(re.findall(r"^[A-Z_]+_IMAGE=(\S+)$", script, re.MULTILINE))
    pulled = {svc["image"] for svc in _services().values() if "build" not in svc}
    assert pulled, "the stack pulls its infrastructure images"
    assert pulled <= standins, f"no stand-in for {pulled - standins}"
    base = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", (REPO / "Dockerfile").read_text(), re.MULTILINE)
    assert base is not None and base.group(1) in standins
    assert "up --build --exit-code-from tests" in script


def test_the_scheduler_calls_all_four_verbs_through_the_balancer() -> None:
    services = _services()
    scheduler = services["kube-scheduler"]
    config_path = _flags(scheduler)["--config"]
    mounts = dict(m.split(":")[:2][::-1] for m in scheduler["volumes"])
    config = yaml.safe_load((REPO / mounts[config_path]).read_text())
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    fast, bind = config["extenders"]
    assert (fast["filterVerb"], fast["prioritizeVerb"], fast["preemptVerb"]) == ("filter", "prioritize", "preempt")
    assert bind["bindVerb"] == "bind" and "filterVerb" not in bind
    assert fast["urlPrefix"] == bind["urlPrefix"] == BALANCER
    assert float(bind["httpTimeout"].rstrip("s")) > float(fast["httpTimeout"].rstrip("s"))
    assert config["clientConnection"]["kubeconfig"] == "/pki/scheduler.kubeconfig"
    # The test runner schedules with this profile, and its replicas are the stack's.
    tests = services["tests"]["environment"]
    assert tests["COMPOSE_SCHEDULER_NAME"] in [p["schedulerName"] for p in config["profiles"]]
    assert sorted(tests["COMPOSE_REPLICAS"].split(",")) == sorted(f"http://{r}:8888" for r in _replicas())


def test_the_balancer_sends_to_every_replica() -> None:
    balancer = _services()["balancer"]
    conf_mount = next(m for m in balancer["volumes"] if m.endswith(".conf:ro"))
    conf = (REPO / conf_mount.split(":")[0]).read_text()
    upstreams = set(re.findall(r"^\s*server\s+([\w-]+):8888;", conf, re.MULTILINE))
    assert upstreams == set(_replicas())
    assert "listen 8888;" in conf
    assert set(_replicas()) <= set(balancer["depends_on"])


def test_the_test_runner_runs_the_shared_scenarios_and_nothing_exits_before_it() -> None:
    services = _services()
    tests = services["tests"]
    assert "profiles" not in tests, "`up --exit-code-from tests` must start it"
    assert "tests/compose/stack_scenarios.py" in tests["command"]
    assert (REPO / "tests" / "compose" / "stack_scenarios.py").is_file()
    # docker-compose 1.x stops everything when any container exits: no service may be a one-shot.
    for name, svc in services.items():
        for dependency, condition in (svc.get("depends_on") or {}).items():
            assert condition["condition"] != "service_completed_successfully", f"{name} -> {dependency}"


def test_dependencies_name_existing_services_and_mounted_files_exist() -> None:
    data = _compose()
    services = data["services"]
    volumes = set(data.get("volumes") or {})
    for name, svc in services.items():
        for dep in svc.get("depends_on") or {}:
            assert dep in services, f"{name} depends on unknown service {dep}"
        for mount in svc.get("volumes") or []:
            source = mount.split(":", 1)[0]
            if source.startswith("."):
                assert (REPO / source).exists(), f"{name} mounts missing {source}"
            else:
                assert source in volumes, f"{name} mounts undeclared volume {source}"


def _stages() -> dict[str, tuple[str, str]]:
    """``{stage: (what it is FROM, its text)}`` of the Dockerfile."""
    text = (REPO / "Dockerfile").read_text()
    parts = re.split(r"^FROM\s+(\S+)\s+AS\s+(\S+)\s*$", text, flags=re.MULTILINE)
    return {name: (base, body) for base, name, body in zip(parts[1::3], parts[2::3], parts[3::3], strict=True)}


def test_the_production_image_is_lean_non_root_and_checks_its_health() -> None:
    stages = _stages()
    assert list(stages)[-1] == "runtime", "the default target is the production image"
    runtime = stages["runtime"][1]
    copied = re.findall(r"^COPY --from=(\S+)", runtime, re.MULTILINE)
    assert copied == ["build"]
    # Nothing the runtime image is made from installs the dev extras.
    stage = "build"
    while stage in stages:
        base, body = stages[stage]
        assert "optional-dependencies" not in body and "[dev]" not in body, stage
        stage = base
    user = re.search(r"^USER\s+(\S+)", runtime, re.MULTILINE)
    assert user is not None and user.group(1).split(":")[0] not in ("0", "root")
    assert re.search(r"^HEALTHCHECK .*app\.healthcheck", runtime, re.MULTILINE)


@pytest.mark.parametrize(
    ("path", "sent"),
    [
        (".venv/bin/python", False),
        (".git/config", False),
        (".cache/kube-bin/kube-apiserver", False),
        ("tests/data/wire/x.json", False),
        ("bench/bench_filter.py", False),
        ("app/main.py", True),
        ("requirements.lock", True),
        ("tests/e2e/scenarios.py", True),
    ],
)
def test_the_build_context_holds_what_the_image_copies_and_no_local_state(path: str, sent: bool) -> None:
    """.dockerignore lists what goes in (everything else stays out); the last matching line wins."""
    included = False
    for line in (REPO / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line.lstrip("!").rstrip("/")
        if pattern == "*" or path == pattern or path.startswith(f"{pattern}/"):
            included = negate
    assert included == sent, f"{path}: sent to the build {included}, wanted {sent}"
