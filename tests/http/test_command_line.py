"""``python -m app`` as an operator meets it: settings errors in one line naming the variable,
``--help`` listing every setting with its default, ``--version``."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

from app.settings import Settings, env_name


def run_app(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EXTENDER_")}
    return subprocess.run(
        [sys.executable, "-m", "app", *args], env={**clean, **env}, capture_output=True, text=True, timeout=60
    )


def test_a_bad_setting_is_one_line_naming_the_variable_and_no_traceback() -> None:
    done = run_app(EXTENDER_GANG_WINDOW_SECONDS="abc", EXTENDER_LEASE_SECONDS="-1")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "EXTENDER_GANG_WINDOW_SECONDS='abc'" in lines[0] and "valid number" in lines[0]
    assert "EXTENDER_LEASE_SECONDS='-1'" in lines[0] and "greater than 0" in lines[0]


def test_a_bad_redis_url_option_is_one_line_that_shows_no_secret() -> None:
    done = run_app(
        EXTENDER_KUBE_MODE="off",
        EXTENDER_REDIS_URL="redis://:hunter2@127.0.0.1:1/0?socket_timeout=abc",
        EXTENDER_REDIS_SENTINELS="not a host list",
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "EXTENDER_REDIS_URL='redis://:***@127.0.0.1:1/0?socket_timeout=abc'" in lines[0]
    assert "socket_timeout" in lines[0] and "EXTENDER_REDIS_SENTINELS" in lines[0]
    assert "hunter2" not in done.stderr


def test_help_lists_every_setting_with_its_default() -> None:
    done = run_app("--help")
    assert done.returncode == 0
    for name in Settings.model_fields:
        assert env_name(name) in done.stdout, name
    assert "EXTENDER_GANG_WINDOW_SECONDS" in done.stdout and "default 30.0" in done.stdout


def test_version() -> None:
    done = run_app("--version")
    assert done.returncode == 0
    assert done.stdout.startswith("python -m app ") and done.stdout.split()[-1][0].isdigit()


def test_api_client_requests_are_logged_only_at_debug(restore_logging: None) -> None:
    from app.serving.logging_config import configure_logging

    httpx_log = logging.getLogger("httpx")
    configure_logging("info")
    assert not httpx_log.isEnabledFor(logging.INFO) and httpx_log.isEnabledFor(logging.WARNING)
    configure_logging("debug")
    assert httpx_log.isEnabledFor(logging.DEBUG)


def test_the_readme_documents_every_setting() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    missing = [env_name(name) for name in Settings.model_fields if f"`{env_name(name)}`" not in readme]
    assert not missing, f"settings missing from the README's configuration table: {missing}"
