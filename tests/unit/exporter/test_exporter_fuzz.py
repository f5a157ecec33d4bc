"""A seeded subset of benchmarks/fuzz_scrape.py: mutated replies of every parser through
the whole scrape and HTTP path, every exposition of a new shape checked by promtool."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

import pytest

FUZZ = Path(__file__).resolve().parents[3] / "benchmarks" / "fuzz_scrape.py"


def load_fuzz() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fuzz_scrape", FUZZ)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_mutated_replies_cost_only_their_daemon_and_pass_promtool() -> None:
    # The 1500-round subset of benchmarks/fuzz_scrape.py's 100,000 (≈ 30 s on one core; the
    # benchmark runs the rest): every parser's mutations come up within the first few hundred.
    failures = load_fuzz().run(1500, seed=3, promtool_every=100, quiet=True)
    assert failures.pop("rounds") == 1500
    assert failures.pop("promtool checked") >= 15  # every new shape and every 100th round
    assert failures.pop("promtool calls") >= 1  # in batches
    assert not failures, failures


def test_fuzz_harness_reports_a_parser_that_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    from cephscope.exporter.collectors import ops

    def broken(*args: object, **kwargs: object) -> None:
        raise TypeError("parser bug")

    monkeypatch.setattr(ops.OpsCollector, "collect_daemon", broken)
    failures = load_fuzz().run(3, seed=3, promtool_every=0, quiet=True)
    failures.pop("promtool calls")
    failures.pop("promtool checked")
    assert sum(n for kind, n in failures.items() if kind.startswith("unexpected")) == 3


def test_promtool_batches_find_the_one_bad_exposition() -> None:
    fuzz = load_fuzz()
    promtool = shutil.which("promtool")
    assert promtool, "promtool is needed (Debian: prometheus)"
    good = b"# HELP up_x Up.\n# TYPE up_x gauge\nup_x{a=\"1\"} 1\n"
    bad = b"# HELP up_x Up.\n# TYPE up_x gauge\nup_x{a=\"1\"} one\n"
    # Alone each parses the same as inside a batch, where names get a prefix per exposition.
    assert fuzz.batched_exposition([good, good]).count(b"# TYPE b1_up_x gauge") == 1
    assert fuzz.promtool_batch(promtool, [(1, "a", good), (2, "b", good)]) == []
    found = fuzz.promtool_batch(promtool, [(1, "a", good), (2, "b", bad), (3, "c", good)])
    assert [(r, s) for r, s, _ in found] == [(2, "b")]
