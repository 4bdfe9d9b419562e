"""Every benchmark starts the way bench/README.md tells a reader to start it.

No test runs the benchmarks themselves (they are measured by hand), so an import that only breaks
one of them as a script or as a module would otherwise go unseen until someone needs its figures.
"""

from __future__ import annotations

import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"

# A documented command: optional environment assignments, then `python -m bench.X` or `python bench/X.py`.
_COMMAND = re.compile(r"`(?:[A-Z_]+=\S+ )*python (-m bench\.\w+|bench/\w+\.py)[^`]*`")


def documented_launches() -> list[list[str]]:
    """The argv prefix of each benchmark command in bench/README.md, each once."""
    found = dict.fromkeys(match.group(1) for match in _COMMAND.finditer((BENCH / "README.md").read_text()))
    return [target.split(" ") for target in found]


def test_the_readme_documents_every_runnable_benchmark() -> None:
    runnable = {path.stem for path in BENCH.glob("*.py") if 'if __name__ == "__main__":' in path.read_text()}
    documented = {Path(launch[-1].replace("bench.", "bench/")).stem for launch in documented_launches()}
    assert runnable - documented == set(), "benchmarks without a command in bench/README.md"
    assert documented - runnable == set(), "bench/README.md names commands that have no runnable file"


def _help(launch: list[str]) -> tuple[list[str], subprocess.CompletedProcess[str]]:
    done = subprocess.run(
        [sys.executable, *launch, "--help"], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )
    return launch, done


def test_every_documented_benchmark_command_starts() -> None:
    launches = documented_launches()
    assert len(launches) >= 10
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(_help, launches))
    failed = {
        " ".join(launch): done.stderr.strip().splitlines()[-1:]
        for launch, done in results
        if done.returncode != 0 or not done.stdout.startswith("usage:")
    }
    assert failed == {}
