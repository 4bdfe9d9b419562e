"""The Redis settings as an operator meets them: Sentinel, replica acknowledgements, and the combinations
that cannot work, each refused at start in one line naming the variables (exit code 2)."""

from __future__ import annotations

import os

import pytest

from app.serving.embedded_redis import embedded_redis_refusal
from app.settings import Settings, SettingsError, load_settings
from tests.http.test_command_line import run_app


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.startswith("EXTENDER_"):
            monkeypatch.delenv(name)
    return monkeypatch


def load(monkeypatch: pytest.MonkeyPatch, **env: str) -> Settings:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return load_settings()


def test_a_sentinel_set_is_a_target_and_counts_as_a_configured_redis(clean_env: pytest.MonkeyPatch) -> None:
    settings = load(
        clean_env,
        EXTENDER_REDIS_SENTINELS="10.0.0.1:26379, sentinel-b:26380,[fd00::1]:26381",
        EXTENDER_REDIS_SENTINEL_MASTER="mymaster",
        EXTENDER_REDIS_SENTINEL_PASSWORD="s3cret",
        EXTENDER_REDIS_URL="rediss://:pw@/2?ssl_ca_certs=/ca.pem",
        EXTENDER_KUBE_MODE="on",
    )
    target = settings.redis_target()
    assert target.sentinels == (("10.0.0.1", 26379), ("sentinel-b", 26380), ("fd00::1", 26381))
    assert target.sentinel_list == "10.0.0.1:26379,sentinel-b:26380,[fd00::1]:26381"
    assert target.sentinel_master == "mymaster" and target.sentinel_password == "s3cret"
    assert target.url_options()["db"] == 2 and target.url_options()["password"] == "pw"
    assert "s3cret" not in repr(target)
    # With a Kubernetes API configured, a Sentinel set is the shared Redis: no private one is refused.
    assert settings.redis_configured and embedded_redis_refusal(settings) is None


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"EXTENDER_REDIS_SENTINELS": "s:26379"}, "EXTENDER_REDIS_SENTINELS is set but EXTENDER_REDIS_SENTINEL_MASTER"),
        ({"EXTENDER_REDIS_SENTINEL_MASTER": "m"}, "EXTENDER_REDIS_SENTINEL_MASTER is set but EXTENDER_REDIS_SENTINELS"),
        (
            {"EXTENDER_REDIS_SENTINEL_PASSWORD": "x"},
            "EXTENDER_REDIS_SENTINEL_PASSWORD is set but EXTENDER_REDIS_SENTIN",
        ),
        (
            {
                "EXTENDER_REDIS_SENTINELS": "s:1",
                "EXTENDER_REDIS_SENTINEL_MASTER": "m",
                "EXTENDER_REDIS_URL": "redis://h:1",
            },
            "EXTENDER_REDIS_URL names a host but EXTENDER_REDIS_SENTINELS is set",
        ),
        (
            {
                "EXTENDER_REDIS_SENTINELS": "s:1",
                "EXTENDER_REDIS_SENTINEL_MASTER": "m",
                "EXTENDER_REDIS_URL": "unix:///s",
            },
            "must be redis:// or rediss://, not unix://",
        ),
        ({"EXTENDER_REDIS_SENTINELS": "s1"}, "EXTENDER_REDIS_SENTINELS='s1': Value error, 's1' is not host:port"),
        ({"EXTENDER_REDIS_SENTINELS": "s:0"}, "'s:0' is not host:port"),
        ({"EXTENDER_REDIS_SENTINELS": " , "}, "no host:port in the list"),
        (
            {"EXTENDER_REDIS_MIN_REPLICAS_ACK": "1", "EXTENDER_REDIS_ACK_TIMEOUT_SECONDS": "3"},
            "EXTENDER_REDIS_ACK_TIMEOUT_SECONDS=3 must be below EXTENDER_REDIS_TIMEOUT_SECONDS=3",
        ),
        ({"EXTENDER_REDIS_MIN_REPLICAS_ACK": "-1"}, "EXTENDER_REDIS_MIN_REPLICAS_ACK='-1'"),
    ],
    ids=[
        "no-master",
        "no-sentinels",
        "password-alone",
        "url-with-host",
        "unix-url",
        "no-port",
        "port-0",
        "empty-list",
        "ack-timeout",
        "negative-acks",
    ],
)
def test_combinations_that_cannot_work_name_the_variables(
    clean_env: pytest.MonkeyPatch, env: dict[str, str], expected: str
) -> None:
    with pytest.raises(SettingsError) as caught:
        load(clean_env, **env)
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def test_an_ack_timeout_longer_than_the_read_timeout_is_fine_when_no_ack_is_asked_for(
    clean_env: pytest.MonkeyPatch,
) -> None:
    assert load(clean_env, EXTENDER_REDIS_TIMEOUT_SECONDS="0.5").redis_min_replicas_ack == 0


def test_a_bad_combination_stops_the_start_in_one_line() -> None:
    done = run_app(EXTENDER_REDIS_SENTINELS="127.0.0.1:26379", EXTENDER_KUBE_MODE="off")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith("error: EXTENDER_REDIS_SENTINELS is set but EXTENDER_REDIS_SENTINEL_MASTER is not")


def test_replica_acknowledgements_on_the_private_redis_are_refused() -> None:
    done = run_app(EXTENDER_REDIS_MIN_REPLICAS_ACK="1", EXTENDER_KUBE_MODE="off")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: EXTENDER_REDIS_MIN_REPLICAS_ACK=1 but no Redis is configured: the private redis-server has no "
        "replicas, so every bind would fail"
    ]
