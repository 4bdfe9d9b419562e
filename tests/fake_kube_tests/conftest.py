"""The fake API server its own tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.plugins.fake_kube import FakeKube


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeKube]:
    """One server for the tests that can share it (each uses its own namespace or object names)."""
    server = FakeKube(tmp_path_factory.mktemp("fake-kube"), bookmark_interval=0.2)
    yield server
    server.stop()
