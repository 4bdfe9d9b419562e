"""The documents' references to tests stay true: every ``tests/…py`` they name exists, and every
``tests/…py::name`` names a test defined in that file. FAULTS.md's rows are claims about what a test
shows, so a test renamed or moved must take its rows along."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = ["README.md", "bench/README.md", *(str(p.relative_to(ROOT)) for p in sorted(ROOT.glob("docs/*.md")))]
REFERENCE = re.compile(r"\b(tests/[A-Za-z0-9_/]+\.py)(?:::([A-Za-z0-9_]+))?")


def references(document: str) -> list[tuple[str, str | None]]:
    text = (ROOT / document).read_text()
    return [(path, name or None) for path, name in REFERENCE.findall(text)]


def test_the_documents_name_tests() -> None:
    assert any(references(d) for d in DOCUMENTS), "no reference found: the pattern no longer matches"


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_test_a_document_names_exists(document: str) -> None:
    missing = []
    for path, name in references(document):
        file = ROOT / path
        if not file.is_file():
            missing.append(path)
        elif name is not None and not re.search(rf"^(?:async )?def {name}\(", file.read_text(), re.MULTILINE):
            missing.append(f"{path}::{name}")
    assert not missing, f"{document} names tests that do not exist: {sorted(set(missing))}"
