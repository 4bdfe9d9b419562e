"""The tested releases: one table in devstack.releases drives CI's matrix, the README and deploy/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from devstack import releases
from devstack.releases import NEWEST, RELEASES, Release

REPO = Path(__file__).resolve().parents[2]


def readme_table() -> list[tuple[str, str]]:
    text = (REPO / "README.md").read_text()
    section = text.split("## Tested Kubernetes releases", 1)[1].split("\n\n", 2)[1]
    return re.findall(r"^\| (\d+\.\d+\.\d+) \| (.+?) \|$", section, re.MULTILINE)


def test_the_readme_lists_exactly_the_releases_ci_runs() -> None:
    rows = readme_table()
    assert [version for version, _ in rows] == [r.version for r in RELEASES]
    for (version, what), release in zip(rows, RELEASES, strict=True):
        assert (what == "the whole tier") == release.whole_tier, version


def test_the_newest_release_runs_the_whole_tier_and_is_what_deploy_installs() -> None:
    assert NEWEST.whole_tier and NEWEST is RELEASES[0]
    assert [r.minor for r in RELEASES] == sorted((r.minor for r in RELEASES), reverse=True)
    component = yaml.safe_load((REPO / "deploy/components/second-scheduler/kustomization.yaml").read_text())
    (image,) = component["images"]
    assert image == {"name": "registry.k8s.io/kube-scheduler", "newTag": f"v{NEWEST.version}"}


def test_select() -> None:
    assert releases.select(None) == list(RELEASES)
    assert releases.select("all") == list(RELEASES)
    # Named releases each run the whole tier, known or not.
    named = [Release("1.28.7", whole_tier=True), Release("1.36.3", whole_tier=True)]
    assert releases.select("v1.28.7, 1.36.3") == named
    with pytest.raises(ValueError, match=r"MAJOR\.MINOR\.PATCH"):
        releases.select("1.30")


def test_a_release_in_kube_bin_dir_is_taken_only_when_it_is_that_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("kube-apiserver", "kube-scheduler"):
        binary = tmp_path / name
        binary.write_text("#!/bin/sh\necho 'Kubernetes v1.31.4'\n")
        binary.chmod(0o755)
    monkeypatch.setenv("KUBE_BIN_DIR", str(tmp_path))
    monkeypatch.setattr(releases, "CACHE", tmp_path / "cache")
    assert releases.locate(Release("1.31.4")) == tmp_path
    assert releases.locate(Release("1.31.5")) is None
    monkeypatch.setattr(releases, "_go", lambda: None)
    assert "Go is not installed" in (releases.why_unavailable(Release("1.31.5")) or "")
    with pytest.raises(releases.ReleaseUnavailable):
        releases.binaries(Release("1.31.5"))


def test_build_missing_builds_only_what_nothing_holds_newest_first_and_goes_on_after_a_failure(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    held = {RELEASES[-1].version}  # the oldest, as KUBE_BIN_DIR gives it in CI
    built: list[str] = []

    def binaries(release: Release, background: bool = False) -> Path:
        assert background
        built.append(release.version)
        if release is RELEASES[0]:
            raise releases.ReleaseUnavailable(f"building v{release.version} failed")
        return Path(f"/cache/v{release.version}")

    monkeypatch.setattr(releases, "locate", lambda r: Path("/bin") if r.version in held else None)
    monkeypatch.setattr(releases, "_go", lambda: "/usr/bin/go")
    monkeypatch.setattr(releases, "binaries", binaries)
    releases.build_missing()
    wanted = sorted((r for r in RELEASES if r.version not in held), key=lambda r: r.order, reverse=True)
    assert built == [r.version for r in wanted]
    out = capsys.readouterr()
    assert f"building v{RELEASES[0].version} failed" in out.err
    assert f"/cache/v{RELEASES[1].version}" in out.out
