"""Tolerations against taints (extenders.tolerations)."""

from __future__ import annotations

from typing import Any

import pytest

from extenders.model import Taint
from extenders.tolerations import first_untolerated_taint, tolerates

TAINT = Taint("dedicated", "gpu", "NoSchedule")


@pytest.mark.parametrize(
    ("toleration", "expected"),
    [
        ({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}, True),
        ({"key": "dedicated", "value": "gpu"}, True),  # default operator Equal, empty effect = all
        ({"key": "dedicated", "operator": "Equal", "value": "cpu"}, False),
        ({"key": "dedicated", "operator": "Exists"}, True),
        ({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "other", "operator": "Exists"}, False),
        ({"operator": "Exists"}, True),  # empty key with Exists tolerates everything
        ({"operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "dedicated", "operator": "Lt", "value": "gpu"}, False),
    ],
)
def test_tolerates(toleration: dict[str, Any], expected: bool) -> None:
    assert tolerates(toleration, TAINT) is expected


def test_first_untolerated_taint_filters_effects() -> None:
    taints = [Taint("a", "", "PreferNoSchedule"), Taint("b", "1", "NoExecute"), Taint("c", "", "NoSchedule")]
    hard = frozenset({"NoSchedule", "NoExecute"})
    assert first_untolerated_taint(taints, [], hard) == Taint("b", "1", "NoExecute")
    assert first_untolerated_taint(taints, [{"key": "b", "operator": "Exists"}], hard) == Taint("c", "", "NoSchedule")
    assert first_untolerated_taint(taints, [{"operator": "Exists"}], hard) is None
    assert first_untolerated_taint(taints, [], None) == Taint("a", "", "PreferNoSchedule")
