"""Seams of the runner: who imports whom, the shared PG wait, restart strategies."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from cephscope.monclient import PgWaitTimeout, pgs_not_clean, wait_pgs_active_clean
from cephscope.runner.benchmarks import BENCHMARKS
from cephscope.runner.cephclient import CephError
from cephscope.runner.restart import FunctionRestart

ROOT = Path(__file__).resolve().parents[3]


def imported_modules(directory: Path) -> dict[str, set[str]]:
    """file -> every `cephscope.*` module it imports (also lazily, inside functions)."""
    found: dict[str, set[str]] = {}
    for path in directory.rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module" \
                    and node.args and isinstance(node.args[0], ast.Constant):
                names.add(str(node.args[0].value))
        found[str(path.relative_to(ROOT))] = {n for n in names if n.startswith("cephscope")}
    return found


@pytest.mark.parametrize(("part", "forbidden"), [
    ("runner", ("cephscope.deploy", "cephscope.dashboards")),
    ("deploy", ("cephscope.runner",)),
    ("exporter", ("cephscope.runner", "cephscope.deploy", "cephscope.dashboards")),
])
def test_parts_import_one_way(part, forbidden):
    bad = {f: sorted(m for m in mods if m.startswith(forbidden))
           for f, mods in imported_modules(ROOT / part).items()}
    assert {f: m for f, m in bad.items() if m} == {}


def test_no_library_module_imports_a_command_line_module():
    bad = {f: sorted(m for m in mods if m.endswith("_cli"))
           for f, mods in imported_modules(ROOT / "runner").items() if not f.endswith("_cli.py")}
    assert {f: m for f, m in bad.items() if m} == {}


def test_shared_low_modules_import_no_part():
    """figures and the Prometheus client serve runner, deploy, dashboards and tests alike."""
    mods = imported_modules(ROOT / "cephscope")
    for low in ("cephscope/figures.py", "cephscope/prometheus_api.py"):
        assert mods[low] == set(), (low, mods[low])


def test_spec_and_steps_do_not_import_each_other():
    mods = imported_modules(ROOT / "runner")
    assert "cephscope.runner.steps" not in mods["runner/spec.py"]
    assert "cephscope.runner.spec" in mods["runner/steps.py"]


def test_benchmarks_declare_their_pool_application():
    assert BENCHMARKS["librbdfio"].pool_application == "rbd"
    assert BENCHMARKS["radosbench"].pool_application == "rados"
    assert BENCHMARKS["radosbench"].report_notes


def test_pg_wait_does_not_trust_a_stale_report_of_a_restarted_osd():
    stats = [{"pgid": "1.0", "state": "active+clean", "up": [0, 1], "acting": [0, 1],
              "reported_epoch": 40},
             {"pgid": "1.1", "state": "active+clean", "up": [2], "acting": [2],
              "reported_epoch": 40}]
    assert pgs_not_clean(stats) == []
    assert pgs_not_clean(stats, {1: 41}) == ["1.0:active+clean"]
    assert pgs_not_clean([{**stats[0], "state": "active+undersized"}]) == \
        ["1.0:active+undersized"]


def test_pg_wait_polls_until_clean_and_times_out_naming_the_pgs():
    replies = iter([CephError("mon busy"),
                    {"pg_stats": [{"pgid": "2.0", "state": "peering"}]},
                    [{"pgid": "2.0", "state": "active+clean"}]])

    def dump():
        reply = next(replies)
        if isinstance(reply, Exception):
            raise reply
        return reply

    wait_pgs_active_clean(dump, 5, poll_seconds=0.01, transient=(CephError,))
    with pytest.raises(PgWaitTimeout, match=r"0/1 active\+clean \(e.g. 2.0:peering\)"):
        wait_pgs_active_clean(lambda: [{"pgid": "2.0", "state": "peering"}], 0.05,
                              poll_seconds=0.01)


def test_function_restart_retries_once_then_names_the_osds():
    calls: list[list[int]] = []

    def flaky(ids, timeout, on_stopped):
        calls.append(ids)
        if len(calls) == 1:
            raise RuntimeError("failed to lock pidfile")

    FunctionRestart("dev cluster", flaky, retry_pause_seconds=0).restart([1, 2], 5)
    assert calls == [[1, 2], [1, 2]]

    def broken(ids, timeout, on_stopped):
        raise RuntimeError("no such daemon")

    with pytest.raises(CephError, match=r"dev cluster could not restart OSDs \[3\]: no such"):
        FunctionRestart("dev cluster", broken, retry_pause_seconds=0).restart([3], 5)
