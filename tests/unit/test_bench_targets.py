"""The issue's ratios the end-to-end benchmark reports, each round against its own reference phases."""

from __future__ import annotations

from typing import Any

from bench.e2e_measures import means, registered, targets_mean, targets_of


def _phase(pods_per_second: float, scheduler: float, apiserver: float, extender: float | None = None) -> dict[str, Any]:
    phase: dict[str, Any] = {
        "pods_per_second": pods_per_second,
        "cpu_ms_per_pod": {"kube-scheduler": scheduler, "kube-apiserver": apiserver},
    }
    if extender is not None:
        phase["extender_cpu_ms_per_pod"] = extender
    return phase


def test_each_ratio_is_taken_against_the_same_rounds_plain_and_null_phases() -> None:
    phases = {
        "plain": _phase(100.0, 10.0, 6.0),
        "null": _phase(60.0, 14.0, 8.0),
        "this": _phase(48.0, 14.7, 8.4, extender=13.0),
        "other": _phase(30.0, 16.8, 10.0, extender=20.0),
    }
    targets = targets_of(phases)
    assert targets["this"] == {
        "over_null": 0.8,
        "scheduler_cpu_over_null": 1.05,
        "apiserver_cpu_over_null": 1.05,
        "extender_cpu_over_plain_scheduler": 1.3,
    }
    assert targets["other"]["over_null"] == 0.5
    assert targets["other"]["extender_cpu_over_plain_scheduler"] == 2.0
    assert targets["null"] == {
        "pods_per_second": 60.0,
        "kube_scheduler_cpu_ms_per_pod": 14.0,
        "kube_apiserver_cpu_ms_per_pod": 8.0,
    }


def test_without_a_null_phase_only_the_cpu_target_is_given() -> None:
    targets = targets_of({"plain": _phase(100.0, 10.0, 6.0), "this": _phase(48.0, 14.7, 8.4, extender=5.0)})
    assert targets["this"] == {"extender_cpu_over_plain_scheduler": 0.5}
    assert "null" not in targets


def test_the_mean_is_over_the_rounds_ratios_not_a_ratio_of_means() -> None:
    # A fast round and a slow one: the ratio of means (0.8 / 1.3) would differ from the mean of ratios.
    fast = targets_of({"null": _phase(100.0, 10.0, 5.0), "this": _phase(90.0, 10.0, 5.0, extender=1.0)})
    slow = targets_of({"null": _phase(20.0, 10.0, 5.0), "this": _phase(10.0, 10.0, 5.0, extender=1.0)})
    assert targets_mean([fast, slow])["this"]["over_null"] == 0.7
    assert "other" not in targets_mean([fast, slow])


def test_compare_means_divide_by_the_null_extenders_mean() -> None:
    rounds = [
        {"tree": t, "pods_per_second": p, "extender_cpu_ms_per_pod": 1.0}
        for t, p in (("this", 40.0), ("other", 30.0), ("other", 34.0), ("this", 44.0))
    ]
    out = means(rounds, 60.0)
    assert out["this"]["pods_per_second"] == 42.0
    assert out["this"]["over_null"] == 0.7
    assert out["other"]["over_null"] == round(32.0 / 60.0, 3)


def test_registered_keeps_only_the_named_verbs_and_none_registers_nothing() -> None:
    entries: list[dict[str, Any]] = [
        {"urlPrefix": "a", "filterVerb": "filter", "prioritizeVerb": "prioritize", "weight": 1},
        {"urlPrefix": "b", "bindVerb": "bind"},
    ]
    assert registered(entries, "filter,prioritize,preempt,bind") == entries
    assert registered(entries, "filter") == [{"urlPrefix": "a", "filterVerb": "filter", "weight": 1}]
    assert registered(entries, "none") == []
