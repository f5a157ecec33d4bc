"""A sweep that searches (adaptive repetition or a search engine): each step is decided as
results come in and run as an ordinary step."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from cephscope.runner.benchmarks.base import Benchmark
from cephscope.runner.planning import Plan, search_plan
from cephscope.runner.progress import Progress
from cephscope.runner.results import RunDir
from cephscope.runner.search import live as live_search
from cephscope.runner.spec import Spec
from cephscope.runner.steps import Step, format_value

Log = Callable[[str], None]
# runs one step with its progress line; the step's error or None
RunStep = Callable[[Step, Progress], "str | None"]


def start_key(plan: Plan, splan: live_search.LivePlan) -> tuple[str, ...] | None:
    """The restart axes' values the cluster runs now (the search starts there), if known."""
    current: Mapping[str, Any] | None = plan.current_restart_values
    if current is None:
        return None
    return tuple(format_value(current.get(a.split(".", 1)[1])) for a, _ in splan.space.axes
                 if a in splan.space.restart_axes)


def run_search(spec: Spec, plan: Plan, rd: RunDir, run_step: RunStep,
               benchmarks: Mapping[str, type[Benchmark]], log: Log) -> None:
    """Adaptive repetition or a search: steps are decided as results come in."""
    splan = search_plan(spec, plan)

    def one(step: Step) -> str | None:
        # numbered among the steps asked so far (the search decides how many there are)
        progress = Progress(rd.steps(), [step], benchmarks, tty=False, log=log)
        return run_step(step, progress)

    live_search.run_live_search(rd, splan, one, start_key(plan, splan), log)
    data = live_search.load_outcome(rd)
    if data is not None:
        for line in live_search.format_outcome(data):
            log(line)
