"""Each domain config is what the settings marked ``Into`` it say: a setting is named once in
``Settings`` (with where it goes) and once in the config that uses it."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, get_args, get_origin

import pytest

from app.settings import Into, Settings, destinations
from extenders.equivalence import CacheConfig
from extenders.equivalence.shared import SharedConfig
from extenders.gang.config import GangConfig
from extenders.kube.events import EventLimits
from extenders.runtime import RuntimeConfig
from extenders.sync.redis_connect import PoolOptions

CONFIGS = (RuntimeConfig, GangConfig, CacheConfig, SharedConfig, EventLimits, PoolOptions)


def marks() -> list[tuple[str, Into]]:
    return [
        (name, mark) for name, info in Settings.model_fields.items() for mark in info.metadata if isinstance(mark, Into)
    ]


def test_every_mark_names_a_field_of_a_known_config() -> None:
    for name, mark in marks():
        assert mark.config in CONFIGS, name
        assert mark.attr in {f.name for f in dataclasses.fields(mark.config)}, (name, mark)


def test_no_config_field_is_fed_twice() -> None:
    for config in CONFIGS:
        attrs = [mark.attr for _name, mark in destinations(config)]
        assert len(attrs) == len(set(attrs)), config


def _changed(name: str, value: Any) -> Any:
    """Another valid value of the setting, so a config that ignored it would show it."""
    choices = (
        get_args(Settings.model_fields[name].annotation)
        if get_origin(Settings.model_fields[name].annotation) is Literal
        else ()
    )
    if choices:
        return next(choice for choice in choices if choice != value)
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value * 2 + 1
    return VALID_CHANGES.get(name, f"{value or 'x'}-changed")


# Settings whose strings have a form of their own.
VALID_CHANGES = {"kube_version": "1.29"}


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.__name__)
def test_each_setting_reaches_its_config(config: type) -> None:
    defaults = Settings()
    for name, mark in destinations(config):
        value = _changed(name, getattr(defaults, name))
        settings = Settings(**{name: value})
        assert getattr(settings.config(config), mark.attr) == value, (name, mark)


def test_the_configs_the_app_builds() -> None:
    settings = Settings(kube_mode="off", gang_labels="team=size", events_qps=3.0, redis_prefix="p", replica_id="r one")
    assert settings.gang_config.labels == (("team", "size"),)
    runtime = settings.runtime_config
    assert runtime.event_limits.qps == 3.0 and runtime.prefix == "p" and runtime.kube_mode == "off"
    pool = settings.pool_options
    assert pool.history_prefix == "p" and pool.client_name == "kube-gang-extender:r_one"


# The config fields settings feed: a mark dropped from a setting would leave its field at the config's default.
FED = {
    RuntimeConfig: {
        "prefix",
        "replica_id",
        "lease_seconds",
        "assumed_ttl_seconds",
        "kube_mode",
        "kube_url",
        "kube_token",
        "kube_version",
        "kube_transport",
        "kube_timeout_seconds",
        "events",
        "min_replicas_ack",
        "replicas_ack_timeout_seconds",
    },
    GangConfig: {
        "window_seconds",
        "cooldown_seconds",
        "cooldown_max_seconds",
        "max_assembling",
        "arrival_lease_seconds",
        "idle_seconds",
        "queue_idle_seconds",
        "poll_interval_seconds",
        "sweep_interval_seconds",
        "assumed_ttl_seconds",
        "victim_wait_seconds",
    },
    CacheConfig: {"enabled", "max_classes", "max_entries", "ttl_seconds"},
    SharedConfig: {"enabled", "max_classes", "ttl_seconds"},
    EventLimits: {"qps", "burst"},
    PoolOptions: {"max_connections", "timeout", "history_prefix"},
}


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.__name__)
def test_the_fields_settings_feed(config: type) -> None:
    assert {mark.attr for _name, mark in destinations(config)} == FED[config]


def test_gc_thresholds_are_three_integers_or_a_clear_error() -> None:
    from pydantic import ValidationError

    from app.settings import parse_gc_thresholds

    assert parse_gc_thresholds(Settings().gc_thresholds) == (20000, 20, 50)
    assert parse_gc_thresholds(" 0, 1 ,2") == (0, 1, 2)
    for bad in ("700,10", "a,b,c", "1,2,3,4", "-1,10,10", ""):
        with pytest.raises(ValueError, match="three non-negative integers"):
            parse_gc_thresholds(bad)
    with pytest.raises(ValidationError, match="gc_thresholds"):
        Settings(gc_thresholds="700,10")
