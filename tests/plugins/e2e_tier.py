"""The end-to-end tier without its binaries: left out with one line saying what is missing.

With ``EXTENDER_E2E=required`` (CI) nothing is left out: the tier's control-plane fixture fails.
"""

from __future__ import annotations

import os

import pytest

from devstack.controlplane import find_binaries

_skipped: list[str] = []
_reported: list[str] = []


def report(line: str) -> None:
    """A line for the end of the run's output (figures a test measured, such as compared verdicts)."""
    _reported.append(line)


def missing_message() -> str | None:
    _, missing = find_binaries()
    if not missing:
        return None
    where = f"KUBE_BIN_DIR={os.environ['KUBE_BIN_DIR']}" if os.environ.get("KUBE_BIN_DIR") else "PATH"
    return f"{', '.join(missing)} not found in {where} (see README, End-to-end tests)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    e2e = [item for item in items if item.get_closest_marker("e2e") is not None]
    if not e2e or os.environ.get("EXTENDER_E2E") == "required":
        return
    message = missing_message()
    if message is None:
        return
    items[:] = [item for item in items if item.get_closest_marker("e2e") is None]
    config.hook.pytest_deselected(items=e2e)
    _skipped.append(f"end-to-end tier skipped ({len(e2e)} tests): {message}")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for line in _skipped:
        terminalreporter.write_line(line, yellow=True)
    for line in _reported:
        terminalreporter.write_line(line)
