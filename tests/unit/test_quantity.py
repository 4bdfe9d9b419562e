"""Quantity parsing against apimachinery's resource.Quantity: suffixes, exponents, rounding up."""

from __future__ import annotations

import time
from fractions import Fraction

import pytest

from extenders.quantity import QuantityError, milli_value, parse_quantity, resource_amount, value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1Ki", 1024),
        ("1Mi", 1024**2),
        ("1Gi", 1024**3),
        ("1Ti", 1024**4),
        ("1Pi", 1024**5),
        ("1Ei", 1024**6),
        ("1k", 1000),
        ("1M", 10**6),
        ("1G", 10**9),
        ("1T", 10**12),
        ("1P", 10**15),
        ("1E", 10**18),
        ("7", 7),
        ("1.5Gi", 3 * 2**29),
        ("0.5Ki", 512),
    ],
)
def test_every_suffix(text: str, expected: int) -> None:
    assert parse_quantity(text) == expected
    assert value(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1n", Fraction(1, 10**9)),
        ("1u", Fraction(1, 10**6)),
        ("1m", Fraction(1, 1000)),
        ("250m", Fraction(1, 4)),
    ],
)
def test_sub_unit_suffixes(text: str, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1e3", 1000), ("1E3", 1000), ("1.5e2", 150), ("5e-1", Fraction(1, 2)), ("12e+1", 120), ("1e0", 1)],
)
def test_decimal_exponents(text: str, expected: Fraction | int) -> None:
    assert parse_quantity(text) == expected


def test_exponent_is_not_confused_with_exa() -> None:
    assert parse_quantity("2E") == 2 * 10**18
    assert parse_quantity("2E2") == 200


def test_milli_values_round_up() -> None:
    assert milli_value("0.5m") == 1  # half a millicore still takes one
    assert milli_value("1n") == 1
    assert milli_value("100m") == 100
    assert milli_value("0.1") == 100
    assert milli_value("1") == 1000
    assert milli_value("2.0001") == 2001


def test_values_round_up() -> None:
    assert value("0.5") == 1
    assert value("1m") == 1
    assert value("1001m") == 2
    assert value("1000m") == 1
    assert value("1.1Ki") == 1127  # 1126.4 rounds up


def test_negative_values_round_toward_positive_infinity() -> None:
    assert value("-1.5") == -1
    assert milli_value("-0.5m") == 0


def test_signs_and_bare_fractions() -> None:
    assert parse_quantity("+3") == 3
    assert parse_quantity("-3k") == -3000
    assert parse_quantity(".5") == Fraction(1, 2)
    assert parse_quantity("5.") == 5
    assert parse_quantity(" 2Gi ") == 2 * 2**30


def test_numbers_are_accepted() -> None:
    assert parse_quantity(3) == 3
    assert parse_quantity(0.25) == Fraction(1, 4)
    assert milli_value(2) == 2000


def test_resource_amount_uses_millicores_only_for_cpu() -> None:
    assert resource_amount("cpu", "1.5") == 1500
    assert resource_amount("cpu", "250m") == 250
    assert resource_amount("memory", "1Gi") == 2**30
    assert resource_amount("memory", "1500m") == 2
    assert resource_amount("nvidia.com/gpu", "2") == 2
    assert resource_amount("ephemeral-storage", "1G") == 10**9


@pytest.mark.parametrize("text", ["", "abc", "1Kb", "1.2.3", "Gi", "1 Gi", "--1", "1e", "1ee3", "0x10", "1gi", "1K"])
def test_rejects_what_kubernetes_rejects(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


@pytest.mark.parametrize("bad", [True, None, [1]])
def test_rejects_non_quantities(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["1e99999999", "-1e99999999", "1e-99999999", "9" * 10_000, "1e" + "9" * 60])
def test_hostile_quantities_are_cheap(text: str) -> None:
    """A huge exponent or digit string is refused or rounded at once, not computed for seconds."""
    started = time.perf_counter()
    try:
        amount: int | None = resource_amount("cpu", text)
    except QuantityError:
        amount = None
    assert time.perf_counter() - started < 0.5
    if text == "1e-99999999":
        assert amount == 1  # a tiny positive amount still takes one millicore, as in apimachinery
    else:
        assert amount is None


def test_large_exponents_within_range_are_exact() -> None:
    assert parse_quantity("1e18") == 10**18
    assert parse_quantity("0e999999") == 0
    assert milli_value("1e-100") == 1
