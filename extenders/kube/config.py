"""Where the Kubernetes API is and how to authenticate: one ``httpx.AsyncClient`` for it.

Loading follows client-go's order (in-cluster service account, then $KUBECONFIG, then
~/.kube/config) through lightkube's kubeconfig parser, which also turns tokens, exec
plugins and client certificates into httpx ``auth``/``verify``. An explicit URL (+ token)
skips all of that, for tests and for ``kubectl proxy``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import yaml
from lightkube.config.client_adapter import ConnectionParams
from lightkube.config.kubeconfig import KubeConfig
from lightkube.config.models import User
from lightkube.core.exceptions import ConfigError

from extenders.kube.transport import TRANSPORTS, build_transport

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
DEFAULT_KUBECONFIG = Path("~/.kube/config")
MODES = ("auto", "on", "off")
# Plain requests (a bind's Binding among them); watches raise the read timeout per request.
DEFAULT_TIMEOUT_SECONDS = 10.0


def request_timeout(seconds: float = DEFAULT_TIMEOUT_SECONDS) -> httpx.Timeout:
    """Each plain API request's timeout: ``seconds`` to read, at most 5 s of it to connect."""
    return httpx.Timeout(seconds, connect=min(5.0, seconds))


class KubeConfigError(RuntimeError):
    """No usable Kubernetes configuration where one was required, or a broken one."""


def _kubeconfig_candidates(explicit: str | None) -> list[Path]:
    if explicit:
        return [Path(explicit).expanduser()]
    env = os.environ.get("KUBECONFIG")
    if env:
        return [Path(p).expanduser() for p in env.split(os.pathsep) if p]
    return [DEFAULT_KUBECONFIG.expanduser()]


def _in_cluster(service_account: Path) -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and (service_account / "token").is_file()


def find_kubeconfig(kubeconfig: str | None = None, service_account: Path = SERVICE_ACCOUNT_DIR) -> KubeConfig | None:
    """The configuration to use, or None when there is none (a present but broken one raises)."""
    try:
        if kubeconfig is None and _in_cluster(service_account):
            return KubeConfig.from_service_account(service_account)
        for path in _kubeconfig_candidates(kubeconfig):
            if path.is_file():
                return KubeConfig.from_file(path)
    except (ConfigError, yaml.YAMLError, KeyError, TypeError, AttributeError, ValueError, OSError) as exc:
        raise KubeConfigError(f"cannot load the Kubernetes configuration: {exc}") from exc
    if kubeconfig:
        raise KubeConfigError(f"kubeconfig {kubeconfig} not found")
    return None


def httpx_params(
    config: KubeConfig, context: str | None = None, timeout: float = DEFAULT_TIMEOUT_SECONDS
) -> dict[str, Any]:
    """httpx.AsyncClient keyword arguments for one kubeconfig context."""
    try:
        single = config.get(context)
        if single is None:
            raise KubeConfigError("the kubeconfig has no usable context")
        if single.user is None:  # lightkube insists on a user; an anonymous one is valid
            single = single._replace(user=User())
        params: dict[str, Any] = ConnectionParams(timeout=request_timeout(timeout)).httpx_params(single)
    except (ConfigError, OSError, ValueError) as exc:
        raise KubeConfigError(f"cannot use the Kubernetes configuration: {exc}") from exc
    return params


def build_http_client(
    mode: str = "auto",
    kubeconfig: str | None = None,
    url: str | None = None,
    token: str | None = None,
    service_account: Path = SERVICE_ACCOUNT_DIR,
    transport: str = "aiohttp",
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
) -> httpx.AsyncClient | None:
    """The API client for ``mode``: "off" -> None; "auto" -> None when nothing is configured;
    "on" -> KubeConfigError when nothing is configured. ``transport`` picks the connection pool
    under httpx (see extenders.kube.transport); ``timeout`` bounds each plain request."""
    if mode not in MODES:
        raise KubeConfigError(f"kube mode must be one of {', '.join(MODES)}, got {mode!r}")
    if transport not in TRANSPORTS:
        raise KubeConfigError(f"kube transport must be one of {', '.join(TRANSPORTS)}, got {transport!r}")
    if mode == "off":
        return None
    if url:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.AsyncClient(
            base_url=url.rstrip("/"),
            headers=headers,
            timeout=request_timeout(timeout),
            transport=build_transport(transport),
        )
    config = find_kubeconfig(kubeconfig, service_account)
    if config is None:
        if mode == "on":
            raise KubeConfigError(
                "kube mode is 'on' but no Kubernetes configuration was found "
                "(no in-cluster service account, $KUBECONFIG or ~/.kube/config; or set EXTENDER_KUBE_URL)"
            )
        return None
    params = httpx_params(config, timeout=timeout)
    # The transport carries the TLS settings (cluster CA, client certificate) from the kubeconfig.
    params["transport"] = build_transport(transport, params.pop("verify", True))
    return httpx.AsyncClient(**params)
