"""The values of a fabric document that are not its structure: names, link counts and link
speeds, each refused with an ``InputError`` that names the field (``Clos.from_dict``).

>>> speeds({"leaf": 400, "core": 800})
{'host': 400.0, 'leaf': 400.0, 'core': 800.0}
>>> link_count(0, "the bundle l0-s0")
Traceback (most recent call last):
...
controller.errors.InputError: fabric: the bundle l0-s0 must have a positive whole number of links, got 0
"""
from __future__ import annotations

from collections.abc import Mapping

from controller.errors import InputError

TIERS = ("host", "leaf", "core")  # link tiers: host-leaf, leaf-spine/aggregation, aggregation-core


def speeds(value) -> dict[str, float]:
    """Gb/s per tier from one number (every tier) or a map of tiers (``host`` and ``core``
    default to ``leaf``'s, ``leaf`` to 100)."""
    if isinstance(value, Mapping):
        if set(value) - set(TIERS):
            raise InputError(f"fabric: link_gbps tiers are {list(TIERS)}, got "
                             f"{sorted(set(value) - set(TIERS))[0]!r}")
        for t, v in value.items():
            speed(t, v)
        base = value.get("leaf", 100)
        out = {t: value.get(t, base) for t in TIERS}
    else:
        out = dict.fromkeys(TIERS, speed(None, value))
    return {t: speed(t, v) for t, v in out.items()}


def speed(tier: str | None, v) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
        of = f" of tier {tier}" if tier else ""
        raise InputError(f"fabric: link_gbps{of} must be a positive number, got {v!r}")
    return float(v)


def link_count(n, what: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InputError(f"fabric: {what} must have a positive whole number of links, got {n!r}")
    return n


def name_list(value, what: str, where: str) -> list[str]:
    """A non-empty list of distinct non-empty names (``what`` in ``where``)."""
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v
                                                           for v in value):
        raise InputError(f"{where}: '{what}' must be a non-empty list of non-empty names")
    if len(set(value)) != len(value):
        dup = next(v for v in value if value.count(v) > 1)
        raise InputError(f"{where}: duplicate name {dup!r} in '{what}'")
    return list(value)
