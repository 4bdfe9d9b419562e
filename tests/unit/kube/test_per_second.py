"""The requeue budget: at most ``limit`` grants in each one-second window."""

from __future__ import annotations

from extenders.kube.requeue import PerSecond


def test_grants_stop_at_the_limit_until_a_second_has_passed() -> None:
    now = [100.0]
    budget = PerSecond(3, clock=lambda: now[0])
    assert [budget.take() for _ in range(5)] == [True, True, True, False, False]
    now[0] = 100.9
    assert not budget.take()
    now[0] = 101.0
    assert [budget.take() for _ in range(4)] == [True, True, True, False]
