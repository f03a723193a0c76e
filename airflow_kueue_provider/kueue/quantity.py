"""Kubernetes resource quantities (``"500m"``, ``"2Gi"``, ``"1e3"``) parsed to exact decimals.

Only what validation needs: parse, so bad values are caught before the API server rejects the Job, and
compare, so ``limits < requests`` is caught too. The grammar follows ``resource.Quantity`` in
``k8s.io/apimachinery``::

    <quantity> ::= <sign>? <number> <suffix>
    <number>   ::= <digits> | <digits>.<digits>? | .<digits>
    <suffix>   ::= Ki|Mi|Gi|Ti|Pi|Ei | n|u|m|""|k|M|G|T|P|E | (e|E)<sign>?<digits>
"""

from __future__ import annotations

import decimal
import re
from decimal import Decimal

_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>[eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?",
    re.ASCII,
)

_BINARY_POWERS = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL_EXPONENTS = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}

# Enough digits that "999999999999.999999Ei" and friends stay exact.
_CONTEXT = decimal.Context(prec=60)


def parse_quantity(value: object) -> Decimal:
    """Return the value of a Kubernetes quantity; ``ValueError`` when it is not one.

    Strings are the usual form; ints and floats are accepted because YAML turns ``cpu: 2`` and
    ``cpu: 0.5`` into numbers. Anything else raises ``ValueError``.
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a Kubernetes quantity (use e.g. '500m', '2', '4Gi')")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"{value!r} is not a Kubernetes quantity (use e.g. '500m', '2', '4Gi')")
        return Decimal(repr(value))
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a Kubernetes quantity: expected a string such as '500m' or '2Gi'")
    match = _QUANTITY.fullmatch(value)
    if match is None:
        raise ValueError(
            f"{value!r} is not a Kubernetes quantity: use a number with an optional suffix, "
            "e.g. '500m', '2', '1.5', '4Gi', '512Mi', '1e3'"
        )
    number = Decimal(match.group("number"))
    if match.group("sign") == "-":
        number = -number
    suffix = match.group("suffix") or ""
    try:
        if suffix in _BINARY_POWERS:
            return _CONTEXT.multiply(number, Decimal(1024 ** _BINARY_POWERS[suffix]))
        exponent = _DECIMAL_EXPONENTS[suffix] if suffix in _DECIMAL_EXPONENTS else int(suffix[1:])
        return number.scaleb(exponent, _CONTEXT)
    except decimal.DecimalException as error:
        raise ValueError(f"{value!r} is out of range for a Kubernetes quantity") from error


def is_quantity(value: object) -> bool:
    """True when ``value`` parses as a Kubernetes quantity."""
    try:
        parse_quantity(value)
    except ValueError:
        return False
    return True
