"""How spec sections are checked: one `Checker` collects the problems of a whole spec, each
naming the file and line; every section parser (spec.py, search/settings.py, recovery.py)
takes it, the key path of its section and the value, and returns the parsed value or None."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cephscope.runner.redaction import is_secret_name, redact_value

# where a key path is in the spec, e.g. "spec.yaml:12"
Where = Callable[[tuple[Any, ...]], str]

# Characters that mean something to a shell. Values never reach a shell (argv lists only), but a
# value holding them is almost certainly a mistake or an injection attempt in a shared spec.
SHELL_METACHARACTERS = frozenset(";&|$`<>(){}\\\n\r'\"*?!")

SCALAR_TYPES = (bool, int, float, str)
# What a run's kept copy of a spec holds in place of a key (redaction.redact_value).
REDACTED_VALUE = re.compile(r"<redacted [0-9a-f]{12}>")


def dotted(path: tuple[Any, ...]) -> str:
    out = ""
    for part in path:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


class Checker:
    """The problems (and warnings) found in a spec, each starting with where it is. Every
    section parser is `parse_X(c, key_path, value, ...) -> parsed value or None` and reports
    to `c`; None when the section is wrong."""

    def __init__(self, where: Where) -> None:
        self.where = where
        self.problems: list[str] = []
        self.warnings: list[str] = []

    @classmethod
    def for_file(cls, path: Path, lines: Mapping[tuple[Any, ...], int]) -> Checker:
        """Where = the file and the line of the key (or of its nearest parent)."""

        def where(key_path: tuple[Any, ...]) -> str:
            p = key_path
            while p and p not in lines:
                p = p[:-1]
            line = lines.get(p)
            return f"{path}:{line}" if line else str(path)

        return cls(where)

    def problem(self, key_path: tuple[Any, ...], text: str) -> None:
        """A problem in the checker's words: `where: text`."""
        self.problems.append(f"{self.where(key_path)}: {text}")

    def error(self, key_path: tuple[Any, ...], value: Any, message: str) -> None:
        # a value under a key named like a secret (secret_key, swift_key, …) is never shown
        if any(isinstance(part, str) and is_secret_name(part) for part in key_path):
            value = redact_value(value)
        self.problem(key_path, f"{dotted(key_path)}: {value!r}: {message}")

    def warn(self, key_path: tuple[Any, ...], message: str) -> None:
        self.warnings.append(f"{self.where(key_path)}: {dotted(key_path)}: {message}")

    def mapping(self, key_path: tuple[Any, ...], value: Any) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.error(key_path, value, f"must be a mapping, not {type(value).__name__}")
            return {}
        return value

    def shell_safe(self, key_path: tuple[Any, ...], value: Any) -> None:
        """Reject any string anywhere below key_path that holds shell metacharacters."""
        if isinstance(value, str):
            if REDACTED_VALUE.fullmatch(value):  # a key a run's kept spec holds redacted
                return
            bad = sorted({c for c in value if c in SHELL_METACHARACTERS})
            if bad:
                self.error(key_path, value,
                           f"holds shell metacharacter(s) {''.join(bad)!r}; not allowed")
        elif isinstance(value, dict):
            for k, v in value.items():
                self.shell_safe((*key_path, k), k)
                self.shell_safe((*key_path, k), v)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                self.shell_safe((*key_path, i), v)

    def axis_values(self, key_path: tuple[Any, ...], value: Any,
                    allowed: tuple[type, ...] = SCALAR_TYPES, minus_one: bool = False
                    ) -> list[Any] | None:
        """A scalar or a non-empty list of scalars of the allowed types; None if invalid.
        `minus_one`: -1 is a value ("unlimited", hsbench's convention), other negatives not."""
        values = value if isinstance(value, list) else [value]
        if isinstance(value, list) and not value:
            self.error(key_path, value, "empty list: a sweep axis needs at least one value")
            return None
        ok = True
        for i, v in enumerate(values):
            vp = (*key_path, i) if isinstance(value, list) else key_path
            if not type_ok(v, allowed):
                names = "/".join(t.__name__ for t in allowed)
                self.error(vp, v, f"wrong type {type(v).__name__}; expected {names}")
                ok = False
            elif isinstance(v, int | float) and not isinstance(v, bool) and v < 0 \
                    and not (minus_one and v == -1):
                self.error(vp, v, "must not be negative")
                ok = False
        if ok and isinstance(value, list) and len({canon(v) for v in values}) != len(values):
            self.error(key_path, value, "axis holds the same value twice")
            ok = False
        return values if ok else None


def canon(value: Any) -> str:
    return f"{type(value).__name__}:{value!r}"


def type_ok(value: Any, allowed: tuple[type, ...]) -> bool:
    if isinstance(value, bool):
        return bool in allowed
    if isinstance(value, int) and int not in allowed and float in allowed:
        return True  # an int where a float is expected is fine
    return isinstance(value, allowed)
