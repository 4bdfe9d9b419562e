"""Kubernetes resource quantities, parsed the way apimachinery's resource.Quantity does.

The scheduler compares integers: CPU in millicores and everything else in base units,
both rounded up (a request of 0.5m CPU still takes 1m), so we do the same with exact
rational arithmetic instead of floats.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
# sign, digits with an optional fraction, then a suffix: binary, decimal, or a decimal exponent.
_QUANTITY = re.compile(r"^([+-]?)(\d+\.?\d*|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")


# Bounds that keep a hostile quantity cheap: "1e99999999" would otherwise cost the process seconds of
# big-integer arithmetic. No real quantity comes near them: int64 amounts stay below 1e19, and an
# exponent beyond them is out of range (positive) or rounds up like any other tiny amount (negative).
MAX_TEXT_LENGTH = 64
MAX_EXPONENT = 100


class QuantityError(ValueError):
    """A string that Kubernetes itself would refuse as a quantity."""


def parse_quantity(text: str | int | float) -> Fraction:
    """Exact value of a quantity string such as ``250m``, ``1.5Gi`` or ``1e3``."""
    if isinstance(text, bool):
        raise QuantityError(f"quantity must be a string or number, got {text!r}")
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        return Fraction(str(text))
    if not isinstance(text, str):  # checked before the cache: unhashable input must not raise TypeError
        raise QuantityError(f"quantity must be a string or number, got {type(text).__name__}")
    return _parse_text(text)


@lru_cache(maxsize=4096)
def _parse_text(text: str) -> Fraction:
    if len(text) > MAX_TEXT_LENGTH:
        raise QuantityError(f"quantity {text[:20]!r}... is too long ({len(text)} characters)")
    match = _QUANTITY.match(text.strip())
    if match is None:
        raise QuantityError(f"quantities must match the regular expression of Kubernetes, got {text!r}")
    sign, number, suffix = match.groups()
    value = Fraction(number)
    suffix = suffix or ""
    if suffix in _BINARY:
        value *= _BINARY[suffix]
    elif suffix in _DECIMAL:
        value *= _DECIMAL[suffix]
    elif value:  # decimal exponent such as e3 or E-2
        exponent = int(suffix[1:])
        if exponent > MAX_EXPONENT:
            raise QuantityError(f"quantity {text!r} is out of range")
        value *= Fraction(10) ** max(exponent, -MAX_EXPONENT)
    return -value if sign == "-" else value


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


def milli_value(text: str | int | float) -> int:
    """Value in thousandths, rounded up (resource.Quantity.MilliValue)."""
    return _ceil(parse_quantity(text) * 1000)


def value(text: str | int | float) -> int:
    """Value in base units, rounded up (resource.Quantity.Value)."""
    return _ceil(parse_quantity(text))


# Kubernetes keeps resource amounts in int64; anything larger is not a real quantity.
MAX_AMOUNT = 2**63 - 1


def resource_amount(name: str, text: str | int | float) -> int:
    """Integer amount of one named resource in the unit the scheduler compares: millicores for cpu."""
    amount = milli_value(text) if name == "cpu" else value(text)
    if abs(amount) > MAX_AMOUNT:
        raise QuantityError(f"quantity {text!r} of {name} is out of range")
    if amount < 0:
        # The API server refuses negative requests, limits, overhead and allocatable; one in a request
        # would make a pod fit anywhere.
        raise QuantityError(f"quantity {text!r} of {name} is negative")
    return amount
