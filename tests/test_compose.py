"""docker-compose.yml stays a valid stack (Docker cannot run here, so check its structure)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]


def _compose() -> dict[str, Any]:
    data = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def test_stack_has_redis_control_plane_replicas_and_tests() -> None:
    services = _compose()["services"]
    assert {"redis", "etcd", "kube-apiserver", "tests"} <= set(services)
    replicas = [name for name, svc in services.items() if "EXTENDER_REDIS_URL" in (svc.get("environment") or {})]
    assert len(replicas) >= 2
    ids = {services[r]["environment"]["EXTENDER_REPLICA_ID"] for r in replicas}
    assert len(ids) == len(replicas), "replicas need distinct ids"
    for name in replicas:
        env = services[name]["environment"]
        assert env["EXTENDER_KUBE_MODE"] == "on"
        assert env["EXTENDER_REDIS_URL"].startswith("redis://redis:")


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
    assert (REPO / "deploy/compose/kubeconfig.yaml").is_file()
    assert (REPO / "Dockerfile").is_file()
