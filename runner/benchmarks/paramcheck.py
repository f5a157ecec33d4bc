"""Checks of one step's benchmark parameters, shared by the benchmark classes."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_SIZE_RE = re.compile(r"^\s*(\d+)\s*([KkMmGg]?)(i?[Bb])?\s*$")
_SIZE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def parse_size(value: Any) -> int:
    """Bytes from an int or a string like '4M', '512K', '4096', '64KiB' (binary units)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a size, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        match = _SIZE_RE.match(value)
        if match:
            return int(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]
    raise ValueError(f"expected a size in bytes or like '4M'/'512K', got {value!r}")


def type_problems(
    name: str, params: Mapping[str, Any], parameters: Mapping[str, tuple[type, ...]]
) -> list[str]:
    """Unknown keys and values of the wrong type (bool is not accepted as a number)."""
    problems: list[str] = []
    for key, value in params.items():
        if key not in parameters:
            known = ", ".join(sorted(parameters))
            problems.append(f"{name}: unknown parameter {key!r} (known: {known})")
            continue
        allowed = parameters[key]
        if value is None:
            continue
        if (isinstance(value, bool) and bool not in allowed) or not isinstance(value, allowed):
            problems.append(
                f"{name}: parameter {key!r} must be {_type_names(allowed)}, got {value!r}"
            )
    return problems


def positive(name: str, params: Mapping[str, Any], key: str, allow_zero: bool = False) -> list[str]:
    value = params.get(key)
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return []
    if value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        return [f"{name}: parameter {key!r} must be {bound}, got {value!r}"]
    return []


def _type_names(types: tuple[type, ...]) -> str:
    return " or ".join(t.__name__ for t in types)
