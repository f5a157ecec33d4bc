"""Sweep axes: a mapping whose list values are axes, expanded into every combination.

Shared by the spec (per-combination validation) and the steps (generation), so neither
imports the other for it.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any


def axes_product(section: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every combination of the section's values (a list is an axis, a scalar is fixed);
    the first key varies slowest (CBT's order)."""
    keys = list(section)
    value_lists = [v if isinstance(v, list) else [v] for v in section.values()]
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*value_lists)]
