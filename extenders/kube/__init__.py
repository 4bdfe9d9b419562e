"""Kubernetes API access: connection config, a small typed client, and nothing else."""

from extenders.kube.client import BindResult, BindStatus, GoneError, KubeApiError, KubeClient, ListResult
from extenders.kube.config import KubeConfigError, build_http_client

__all__ = [
    "BindResult",
    "BindStatus",
    "GoneError",
    "KubeApiError",
    "KubeClient",
    "KubeConfigError",
    "ListResult",
    "build_http_client",
]
