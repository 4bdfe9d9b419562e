"""Process settings, read from ``EXTENDER_*`` environment variables (and KUBECONFIG).

One place lists every knob with its default, so the README's configuration reference
and the code cannot disagree.
"""

from __future__ import annotations

import os
import socket
from typing import Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

ENV_PREFIX = "EXTENDER_"


def _default_replica_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    redis_url: str | None = Field(
        default=None, description="Redis URL; when unset, `python -m app` starts a private redis-server"
    )
    redis_prefix: str = Field(default="extender", description="prefix of every Redis key (one per cluster)")
    redis_max_connections: int = Field(default=64, ge=1, description="connection pool size per process")
    redis_timeout_seconds: float = Field(
        default=3.0, gt=0, description="Redis connect/read timeout and wait for a pooled connection"
    )
    replica_id: str = Field(default_factory=_default_replica_id, description="this replica's name")
    policy_file: str | None = Field(default=None, description="YAML/JSON scheduling policy; built-in default if unset")
    max_body_bytes: int = Field(default=16 * 1024 * 1024, ge=1024, description="larger request bodies get 413")
    lease_seconds: float = Field(default=15.0, gt=0, description="leader lease for the single watcher")
    assumed_ttl_seconds: float = Field(default=60.0, gt=0, description="assumed pods never confirmed expire")
    kube_mode: Literal["auto", "on", "off"] = Field(
        default="auto", description="auto: watch the API when a kubeconfig or service account is found"
    )
    kube_url: str | None = Field(default=None, description="explicit API server URL (overrides kubeconfig)")
    kube_token: str | None = Field(default=None, description="bearer token for kube_url")
    kube_transport: Literal["aiohttp", "httpx"] = Field(
        default="aiohttp", description="connection pool under the httpx client: aiohttp (faster) or httpx's own"
    )
    gang_window_seconds: float = Field(default=30.0, gt=0, description="gang window from its first arrival at bind")
    gang_cooldown_seconds: float = Field(default=10.0, ge=0, description="a rejected gang waits this long")
    gang_cooldown_max_seconds: float = Field(
        default=300.0, ge=0, description="each rejection in a row doubles the cool-down, up to this"
    )
    gang_max_assembling: int = Field(default=1, ge=1, description="gangs admitted to assemble at once (no deadlock)")
    gang_arrival_lease_seconds: float = Field(default=5.0, gt=0, description="held bind calls refresh this lease")
    gang_idle_seconds: float = Field(default=600.0, gt=0, description="gang bookkeeping untouched this long is deleted")
    gang_queue_idle_seconds: float = Field(default=60.0, gt=0, description="idle queued gangs lose their place")
    gang_poll_interval_seconds: float = Field(default=0.5, gt=0, description="held calls re-check their gang")
    gang_sweep_interval_seconds: float = Field(default=1.0, gt=0, description="upkeep of gang leases and windows")
    gang_labels: str | None = Field(default=None, description="name-key=min-key pairs, comma separated")
    equivalence_cache: bool = Field(
        default=True, description="reuse node-local filter verdicts across pods of one equivalence class"
    )
    equivalence_cache_classes: int = Field(default=256, ge=1, description="classes the cache holds, at most")
    equivalence_cache_ttl_seconds: float = Field(
        default=300.0, gt=0, description="a class unused this long is dropped from the cache"
    )
    events: bool = Field(default=True, description="write Kubernetes Events about gangs and failed binds")
    events_qps: float = Field(default=10.0, gt=0, description="Event writes per second to the API server, at most")
    events_burst: int = Field(default=50, ge=1, description="Event writes allowed in a burst above events_qps")
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="debug, info, warning or error"
    )
    log_format: Literal["text", "json"] = Field(
        default="text",
        description="text, or json: one object per line (time, level, logger, message, replica, "
        "and verb, pod, gang, node when known)",
    )
    access_log: bool = Field(default=False, description="log every request (uvicorn access log)")
    embedded_redis: bool = Field(
        default=False,
        description="start a private redis-server when EXTENDER_REDIS_URL is unset even though a Kubernetes API "
        "is configured (otherwise refused: each replica would have its own state)",
    )
    tls_cert_file: str | None = Field(
        default=None, description="PEM certificate (chain) to serve HTTPS with; unset: plain HTTP"
    )
    tls_key_file: str | None = Field(default=None, description="PEM private key of tls_cert_file (not encrypted)")
    tls_client_ca_file: str | None = Field(
        default=None, description="PEM CA bundle: require a client certificate signed by it (mutual TLS)"
    )
    tls_reload_interval_seconds: float = Field(
        default=5.0, gt=0, description="how often the certificate and key files are checked for a new pair"
    )
    health_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="a second, plain-HTTP port serving only /healthz, /readyz and /metrics "
        "(for probes under mutual TLS); unset: none",
    )
    operator_api: bool = Field(
        default=True, description="serve the operator endpoints /v1/* (explain, nodes, gangs, cache stats)"
    )
    operator_token: str | None = Field(
        default=None, description="require 'Authorization: Bearer <token>' on /v1/*; unset: no token"
    )

    @field_validator("log_level", "log_format", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value


class SettingsError(ValueError):
    """Settings that cannot be used; one line per bad variable, naming it."""


def env_name(field: str) -> str:
    return f"{ENV_PREFIX}{field.upper()}"


def load_settings() -> Settings:
    """The settings from the environment, or SettingsError naming each bad variable and what it wants."""
    try:
        return Settings()
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            field = str(error["loc"][0]) if error["loc"] else ""
            value = os.environ.get(env_name(field), "")
            lines.append(f"{env_name(field)}={value!r}: {error['msg']}")
        raise SettingsError("; ".join(lines)) from None


def settings_help() -> str:
    """Every setting with its default, for ``--help``."""
    lines = ["settings (environment variables):"]
    for name, field in Settings.model_fields.items():
        if field.default_factory is not None:
            default = "(per process)"
        else:
            default = "unset" if field.default is None else repr(field.default)
        lines.append(f"  {env_name(name):<40} default {default}")
        if field.description:
            lines.append(f"      {field.description}")
    return "\n".join(lines)
