"""Golden parsed results of the tool captures; CEPHSCOPE_UPDATE_GOLDEN=1 rewrites them."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

TOOLS_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "tools"
GOLDEN_DIR = TOOLS_DIR / "golden"


def _close(a: Any, b: Any, path: str) -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        problems = []
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                problems.append(f"{path}.{key}: present in only one side")
            else:
                problems += _close(a[key], b[key], f"{path}.{key}")
        return problems
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: length {len(a)} != {len(b)}"]
        return [p for i, (x, y) in enumerate(zip(a, b, strict=True)) for p in _close(x, y, f"{path}[{i}]")]
    if isinstance(a, float | int) and isinstance(b, float | int) and not isinstance(a, bool):
        return [] if math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) else [f"{path}: {a} != {b}"]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def check_golden(name: str, parsed: dict[str, Any]) -> None:
    path = GOLDEN_DIR / f"{name}.json"
    # round-trip through JSON so tuples/keys compare like the stored file
    parsed = json.loads(json.dumps(parsed, sort_keys=True))
    if os.environ.get("CEPHSCOPE_UPDATE_GOLDEN") == "1":
        GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(parsed, indent=2, sort_keys=True) + "\n")
        return
    assert path.exists(), f"golden file {path} missing; run with CEPHSCOPE_UPDATE_GOLDEN=1"
    expected = json.loads(path.read_text())
    problems = _close(parsed, expected, name)
    assert not problems, "parsed result differs from golden:\n" + "\n".join(problems[:20])
