"""Process settings, read from ``EXTENDER_*`` environment variables (and KUBECONFIG).

One place lists every knob with its default, so the README's configuration reference
and the code cannot disagree, and hands each part of the domain its own typed config.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar
from urllib.parse import urlsplit

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from redis.asyncio.connection import parse_url

from app.redaction import redacted_url
from extenders.binding.binder import VICTIM_WAIT_SECONDS
from extenders.equivalence import CacheConfig
from extenders.equivalence.shared import SharedConfig
from extenders.features import parse_version
from extenders.gang.config import DEFAULT_LABELS, GangConfig, parse_label_pairs
from extenders.kube.events import EventLimits
from extenders.runtime import RuntimeConfig
from extenders.sync.redis_connect import PoolOptions, RedisTarget, parse_sentinels

ENV_PREFIX = "EXTENDER_"


def parse_gc_thresholds(value: str) -> tuple[int, int, int]:
    """``"A,B,C"``: gc.set_threshold's three thresholds (the first 0 turns the collector off)."""
    parts = [p.strip() for p in value.split(",")]
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"expected three non-negative integers separated by commas, like 20000,20,50; got {value!r}")
    first, second, third = map(int, parts)
    return first, second, third


C = TypeVar("C")


@dataclass(frozen=True, slots=True)
class Into:
    """Marks a setting as the field ``attr`` of the domain config ``config`` (``Settings.config``)."""

    config: type
    attr: str


def _default_replica_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    redis_url: str | None = Field(
        default=None,
        description="Redis URL; when unset (and no Sentinel), `python -m app` starts a private redis-server; "
        "with Sentinel, only credentials, database and TLS options, no host (redis://:PASSWORD@/0)",
    )
    redis_sentinels: str | None = Field(
        default=None, description="Sentinels (host:port, comma separated) that name the Redis primary"
    )
    redis_sentinel_master: str | None = Field(default=None, description="the master name the Sentinels monitor")
    redis_sentinel_password: str | None = Field(
        default=None, description="password of the Sentinels themselves (their requirepass); unset: none"
    )
    redis_min_replicas_ack: Annotated[int, Into(RuntimeConfig, "min_replicas_ack")] = Field(
        default=0, ge=0, description="Redis replicas that must hold a reservation before the API binds on it (WAIT)"
    )
    redis_ack_timeout_seconds: Annotated[float, Into(RuntimeConfig, "replicas_ack_timeout_seconds")] = Field(
        default=1.0, gt=0, description="how long a bind waits for those acknowledgements before answering an error"
    )
    redis_prefix: Annotated[str, Into(RuntimeConfig, "prefix"), Into(PoolOptions, "history_prefix")] = Field(
        default="extender", description="prefix of every Redis key (one per cluster)"
    )
    redis_max_connections: Annotated[int, Into(PoolOptions, "max_connections")] = Field(
        default=64, ge=1, description="connection pool size per process"
    )
    redis_timeout_seconds: Annotated[float, Into(PoolOptions, "timeout")] = Field(
        default=3.0, gt=0, description="Redis connect/read timeout and wait for a pooled connection"
    )
    replica_id: Annotated[str, Into(RuntimeConfig, "replica_id")] = Field(
        default_factory=_default_replica_id, description="this replica's name"
    )
    policy_file: str | None = Field(default=None, description="YAML/JSON scheduling policy; built-in default if unset")
    max_body_bytes: int = Field(default=16 * 1024 * 1024, ge=1024, description="larger request bodies get 413")
    gc_thresholds: str = Field(
        default="20000,20,50",
        description="the cyclic garbage collector's three thresholds (gc.set_threshold) for a served process; "
        "Python's own 700,10,10 spent 0.46 ms of CPU per scheduled pod in the end-to-end benchmark, these 0.1",
    )
    lease_seconds: Annotated[float, Into(RuntimeConfig, "lease_seconds")] = Field(
        default=15.0, gt=0, description="leader lease for the single watcher"
    )
    assumed_ttl_seconds: Annotated[
        float, Into(RuntimeConfig, "assumed_ttl_seconds"), Into(GangConfig, "assumed_ttl_seconds")
    ] = Field(default=60.0, gt=0, description="assumed pods never confirmed expire")
    kube_mode: Annotated[Literal["auto", "on", "off"], Into(RuntimeConfig, "kube_mode")] = Field(
        default="auto", description="auto: watch the API when a kubeconfig or service account is found"
    )
    kube_url: Annotated[str | None, Into(RuntimeConfig, "kube_url")] = Field(
        default=None, description="explicit API server URL (overrides kubeconfig)"
    )
    kube_token: Annotated[str | None, Into(RuntimeConfig, "kube_token")] = Field(
        default=None, description="bearer token for kube_url"
    )
    kube_version: Annotated[str | None, Into(RuntimeConfig, "kube_version")] = Field(
        default=None,
        description="the kube-scheduler release whose plug-in behaviour to follow (e.g. 1.31); default: the "
        "API server's, read from /version",
    )
    kube_transport: Annotated[Literal["aiohttp", "httpx"], Into(RuntimeConfig, "kube_transport")] = Field(
        default="aiohttp", description="connection pool under the httpx client: aiohttp (faster) or httpx's own"
    )
    kube_timeout_seconds: Annotated[float, Into(RuntimeConfig, "kube_timeout_seconds")] = Field(
        default=10.0,
        gt=0,
        description="timeout of each Kubernetes API request (watches excepted): a bind whose Binding request "
        "outlives it answers an Error",
    )
    preemptor_bind_wait_seconds: Annotated[float, Into(GangConfig, "victim_wait_seconds")] = Field(
        default=VICTIM_WAIT_SECONDS,
        ge=0,
        description="a preemptor's bind, refused only for its own preemption's victims, waits this long for the "
        "watch to show them gone (kube-scheduler binds it once its own informer does)",
    )
    gang_window_seconds: Annotated[float, Into(GangConfig, "window_seconds")] = Field(
        default=30.0, gt=0, description="gang window from its first arrival at bind"
    )
    gang_cooldown_seconds: Annotated[float, Into(GangConfig, "cooldown_seconds")] = Field(
        default=10.0, ge=0, description="a rejected gang waits this long"
    )
    gang_cooldown_max_seconds: Annotated[float, Into(GangConfig, "cooldown_max_seconds")] = Field(
        default=300.0, ge=0, description="each rejection in a row doubles the cool-down, up to this"
    )
    gang_max_assembling: Annotated[int, Into(GangConfig, "max_assembling")] = Field(
        default=1, ge=1, description="gangs admitted to assemble at once (no deadlock)"
    )
    gang_arrival_lease_seconds: Annotated[float, Into(GangConfig, "arrival_lease_seconds")] = Field(
        default=5.0, gt=0, description="held bind calls refresh this lease"
    )
    gang_idle_seconds: Annotated[float, Into(GangConfig, "idle_seconds")] = Field(
        default=600.0, gt=0, description="gang bookkeeping untouched this long is deleted"
    )
    gang_queue_idle_seconds: Annotated[float, Into(GangConfig, "queue_idle_seconds")] = Field(
        default=60.0, gt=0, description="idle queued gangs lose their place"
    )
    gang_poll_interval_seconds: Annotated[float, Into(GangConfig, "poll_interval_seconds")] = Field(
        default=0.5, gt=0, description="held calls re-check their gang"
    )
    gang_sweep_interval_seconds: Annotated[float, Into(GangConfig, "sweep_interval_seconds")] = Field(
        default=1.0, gt=0, description="upkeep of gang leases and windows"
    )
    gang_labels: str | None = Field(default=None, description="name-key=min-key pairs, comma separated")
    equivalence_cache: Annotated[bool, Into(CacheConfig, "enabled")] = Field(
        default=True,
        description="reuse node-local filter verdicts and raw scores across pods of one equivalence class",
    )
    equivalence_cache_classes: Annotated[int, Into(CacheConfig, "max_classes"), Into(SharedConfig, "max_classes")] = (
        Field(default=256, ge=1, description="classes the cache holds, at most")
    )
    equivalence_cache_entries: Annotated[int, Into(CacheConfig, "max_entries")] = Field(
        default=1_000_000, ge=1, description="entries (node verdicts and raw scores) the cache holds, at most"
    )
    equivalence_cache_ttl_seconds: Annotated[
        float, Into(CacheConfig, "ttl_seconds"), Into(SharedConfig, "ttl_seconds")
    ] = Field(default=300.0, gt=0, description="a class unused this long is dropped from the cache")
    equivalence_cache_shared: Annotated[bool, Into(SharedConfig, "enabled")] = Field(
        default=False,
        description="share computed verdicts and raw scores through Redis, for replicas meeting a class "
        "they hold nothing of (same cap and TTL there); off: measured slower than computing them",
    )
    filter_snapshot_max_age_ms: float = Field(
        default=50.0,
        ge=0,
        le=1000,
        description="a filter answers on this replica's last read of the snapshot when that read began at most "
        "this long ago, instead of reading Redis after the call arrived (bind re-validates in Redis; gang "
        "members and pods refused on every node are decided on a read of their own); 0: every filter reads",
    )
    bind_snapshot_max_age_ms: float = Field(
        default=50.0,
        ge=0,
        le=1000,
        description="a bind of a pod outside any gang checks its fit on this replica's last read of the snapshot "
        "when that read began at most this long ago (the reservation's compare-and-set on the node refuses a "
        "read that missed a change there, and the fit is checked again on a fresh one); 0: every bind reads",
    )
    prioritize_ahead: bool = Field(
        default=True,
        description="score a pod's passing nodes as soon as its filter has answered, while kube-scheduler runs "
        "its own score plugins, so its prioritize call on this replica finds the answer ready; off when a "
        "balancer sends each call to another replica (the work would be wasted)",
    )
    events: Annotated[bool, Into(RuntimeConfig, "events")] = Field(
        default=True, description="write Kubernetes Events about gangs and failed binds"
    )
    events_qps: Annotated[float, Into(EventLimits, "qps")] = Field(
        default=10.0, gt=0, description="Event writes per second to the API server, at most"
    )
    events_burst: Annotated[int, Into(EventLimits, "burst")] = Field(
        default=50, ge=1, description="Event writes allowed in a burst above events_qps"
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="debug, info, warning or error"
    )
    log_format: Literal["text", "json"] = Field(
        default="text",
        description="text, or json: one object per line (time, level, logger, message, replica, "
        "and verb, pod, gang, node when known)",
    )
    access_log: bool = Field(default=False, description="log every request (uvicorn access log)")
    http_keep_alive_seconds: int = Field(
        default=120,
        ge=1,
        description="an idle client connection is closed after this long; keep it above the client's own idle "
        "timeout (kube-scheduler's: 90 s), or a call sent as the server closes fails",
    )
    shutdown_drain_seconds: float = Field(
        default=5.0,
        ge=0,
        le=300,
        description="on SIGTERM, keep serving up to this long with every answer closing its connection, so "
        "clients retire their connections before the server closes any; 0: shut down at once",
    )
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

    @field_validator("redis_url")
    @classmethod
    def _redis_url_options(cls, value: str | None) -> str | None:
        if value:
            parse_url(value)  # ValueError for a bad scheme or query option, e.g. socket_timeout=abc
        return value

    @field_validator("gc_thresholds")
    @classmethod
    def _gc_thresholds(cls, value: str) -> str:
        parse_gc_thresholds(value)
        return value

    @field_validator("kube_version")
    @classmethod
    def _kube_version(cls, value: str | None) -> str | None:
        if value:
            parse_version(value)  # VersionError (a ValueError) names the expected form
        return value or None

    @field_validator("redis_sentinels")
    @classmethod
    def _sentinel_list(cls, value: str | None) -> str | None:
        if value is not None:
            parse_sentinels(value)  # ValueError: one line naming the variable, as any other bad setting
        return value

    @property
    def redis_configured(self) -> bool:
        """A shared Redis is configured (a URL, or Sentinels); else ``python -m app`` may start a private one."""
        return bool(self.redis_url or self.redis_sentinels)

    def redis_target(self) -> RedisTarget:
        return RedisTarget(
            url=self.redis_url or None,
            sentinels=parse_sentinels(self.redis_sentinels) if self.redis_sentinels else (),
            sentinel_master=self.redis_sentinel_master,
            sentinel_password=self.redis_sentinel_password,
        )

    def config(self, cls: type[C], **given: Any) -> C:
        """The domain config ``cls`` with every setting marked ``Into`` it, and ``given`` (what settings
        do not hold as such): each setting is named once here, once where it is used."""
        values = {into.attr: getattr(self, name) for name, into in destinations(cls)}
        return cls(**values, **given)

    @property
    def pool_options(self) -> PoolOptions:
        """The Redis pool's options; connections are named after the replica, so CLIENT LIST shows whose they are."""
        return self.config(
            PoolOptions, client_name=re.sub(r"[^A-Za-z0-9._:-]", "_", f"kube-gang-extender:{self.replica_id}")
        )

    @property
    def runtime_config(self) -> RuntimeConfig:
        return self.config(RuntimeConfig, event_limits=self.config(EventLimits))

    @property
    def gang_config(self) -> GangConfig:
        """ValueError when ``gang_labels`` is not of the form name-key=min-key,..."""
        return self.config(
            GangConfig, labels=parse_label_pairs(self.gang_labels) if self.gang_labels else DEFAULT_LABELS
        )


def destinations(cls: type) -> list[tuple[str, Into]]:
    """(setting, its ``Into`` mark) for every setting that goes into the domain config ``cls``."""
    return [
        (name, mark)
        for name, info in Settings.model_fields.items()
        for mark in info.metadata
        if isinstance(mark, Into) and mark.config is cls
    ]


# Settings whose values never appear in an error message.
SECRET_SETTINGS = frozenset({"redis_sentinel_password", "operator_token"})


class SettingsError(ValueError):
    """Settings that cannot be used; one line per bad variable, naming it."""


def env_name(field: str) -> str:
    return f"{ENV_PREFIX}{field.upper()}"


def load_settings() -> Settings:
    """The settings from the environment, or SettingsError naming each bad variable and what it wants."""
    try:
        settings = Settings()
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            field = str(error["loc"][0]) if error["loc"] else ""
            value = os.environ.get(env_name(field), "")
            shown = "***" if field in SECRET_SETTINGS else redacted_url(value) if field == "redis_url" else value
            lines.append(f"{env_name(field)}={shown!r}: {error['msg']}")
        raise SettingsError("; ".join(lines)) from None
    problems = redis_problems(settings)
    if problems:
        raise SettingsError("; ".join(problems))
    return settings


def redis_problems(settings: Settings) -> list[str]:
    """Redis settings each fine alone but not together, one phrase each naming the variables."""
    sentinels, master = env_name("redis_sentinels"), env_name("redis_sentinel_master")
    problems = []
    if settings.redis_sentinels and not settings.redis_sentinel_master:
        problems.append(f"{sentinels} is set but {master} is not: name the master the Sentinels monitor")
    if settings.redis_sentinel_master and not settings.redis_sentinels:
        problems.append(f"{master} is set but {sentinels} is not: list the Sentinels (host:port, comma separated)")
    if settings.redis_sentinel_password and not settings.redis_sentinels:
        problems.append(f"{env_name('redis_sentinel_password')} is set but {sentinels} is not")
    if settings.redis_sentinels and settings.redis_url:
        parts = urlsplit(settings.redis_url)
        if parts.scheme not in ("redis", "rediss"):
            problems.append(
                f"{env_name('redis_url')} with {sentinels} must be redis:// or rediss://, not {parts.scheme}://"
            )
        elif parts.hostname or parts.port:
            problems.append(
                f"{env_name('redis_url')} names a host but {sentinels} is set: the Sentinels name the primary, so the "
                "URL carries only credentials, database and TLS options (redis://:PASSWORD@/0)"
            )
    if settings.redis_min_replicas_ack and settings.redis_ack_timeout_seconds >= settings.redis_timeout_seconds:
        problems.append(
            f"{env_name('redis_ack_timeout_seconds')}={settings.redis_ack_timeout_seconds:g} must be below "
            f"{env_name('redis_timeout_seconds')}={settings.redis_timeout_seconds:g} (the read would time out first)"
        )
    return problems
