"""requirements.lock pins every dependency pyproject.toml names, and every install goes through it.

A dependency added to pyproject.toml without running scripts/lock.sh would be installed at whatever
version the index offers that day, in CI and in the image alike.
"""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "requirements.lock"


def _pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in LOCK.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, version = line.partition("==")
        assert sep and version and not any(c in line for c in ";@[ "), f"not an exact pin: {line!r}"
        pins[canonicalize_name(name)] = version
    return pins


def _requirements() -> list[Requirement]:
    """Runtime, every optional group, and the build backend."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    names = list(project["project"]["dependencies"])
    for group in project["project"].get("optional-dependencies", {}).values():
        names += group
    names += project["build-system"]["requires"]
    return [Requirement(name) for name in names]


def test_every_dependency_in_pyproject_has_an_exact_pin_within_its_range() -> None:
    pins = _pins()
    requirements = _requirements()
    missing = [str(r) for r in requirements if canonicalize_name(r.name) not in pins]
    assert not missing, f"not in requirements.lock (run scripts/lock.sh): {missing}"
    outside = [
        f"{r} (locked {pins[canonicalize_name(r.name)]})"
        for r in requirements
        if not r.specifier.contains(pins[canonicalize_name(r.name)], prereleases=True)
    ]
    assert not outside, f"pins outside pyproject.toml's ranges (run scripts/lock.sh): {outside}"


def test_what_the_requested_extras_pull_in_is_pinned_too() -> None:
    """uvicorn[standard] and redis[hiredis] bring packages of their own; they need pins as well."""
    pins = _pins()
    missing = []
    for requirement in _requirements():
        if not requirement.extras:
            continue
        for line in metadata.requires(requirement.name) or []:
            dependency = Requirement(line)
            if dependency.marker is None or not any(
                dependency.marker.evaluate({"extra": extra}) for extra in requirement.extras
            ):
                continue
            if canonicalize_name(dependency.name) not in pins:
                missing.append(f"{dependency.name} (from {requirement})")
    assert not missing, f"not in requirements.lock (run scripts/lock.sh): {missing}"


def test_the_image_and_bootstrap_install_through_the_lock() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "PIP_CONSTRAINT=/src/requirements.lock" in dockerfile
    assert "COPY requirements.lock" in dockerfile
    bootstrap = (REPO / "scripts" / "bootstrap.sh").read_text()
    assert 'PIP_CONSTRAINT="$PWD/requirements.lock"' in bootstrap
    # A changed lock changes the install stamp, so bootstrap installs again.
    stamp = next(line for line in bootstrap.splitlines() if line.startswith("stamp="))
    assert "requirements.lock" in stamp and "pyproject.toml" in stamp
