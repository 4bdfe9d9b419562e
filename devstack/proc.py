"""What a benchmark reads about a process it started: whether it answers, its CPU and resident size (Linux
``/proc``)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import httpx

from devstack import http_client
from devstack.kube import wait_for


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU the process has used so far; None once it is gone (or without ``/proc``)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def resident_mb(pid: int) -> float:
    """The process's resident set size (VmRSS), in MiB (0 once it is gone)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return 0.0
    for line in lines:
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def wait_http(url: str, process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """Until ``url`` answers 200; fails at once when ``process`` (the server behind it) exits."""

    def answers() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"{url}: process exited with {process.returncode}")
        try:
            return http_client.get(url, timeout=0.5).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(answers, timeout, f"{url} answering 200", interval=0.1)
