"""Running `cephscope sweep` for real against the session cluster and stack, and asking
Prometheus about it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cephscope.deploy.devcluster import DevCluster
from cephscope.deploy.stack import Stack
from cephscope.prometheus_api import PrometheusError

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class SweepRun:
    run_id: str
    run_dir: Path
    start: float  # first step's benchmark start (unix seconds)
    end: float  # last step's benchmark end
    last_step_middle: float  # a moment inside the last step
    steps: list[dict[str, Any]]


def run_sweep(
    devcluster: DevCluster,
    stack: Stack,
    spec_text: str,
    run_dir: Path,
    baseline: Path | None = None,
    timeout: float = 240,
    extra_args: Sequence[str] = (),
) -> SweepRun:
    """Run `cephscope sweep` for real with the stack scraping its metrics endpoint
    (`extra_args` after the defaults below: a repeated flag overrides them)."""
    spec = run_dir.parent / f"{run_dir.name}.yaml"
    spec.write_text(spec_text)
    argv = [
        sys.executable, "-m", "cephscope.cli", "sweep", str(spec),
        "--devcluster", str(devcluster.state_dir),
        "--metrics-port", str(stack.runner_port),
        "--prometheus-url", stack.prometheus_url,
        "--results-dir", str(run_dir),
        # Prometheus scraped the steps while they ran; no need to wait after the last one.
        # A 6 s idle baseline is scraped at least once (5 s interval): the run-phase panel.
        "--metrics-linger", "2", "--idle-baseline", "6",
    ]
    if baseline is not None:
        argv += ["--baseline", str(baseline)]
    argv += extra_args
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    rows = summary["rows"]
    assert rows and all(r["status"] == "done" for r in rows), rows
    last = rows[-1]
    idle = json.loads((run_dir / "state.json").read_text())["idle_baseline"]
    return SweepRun(
        run_id=summary["run_id"],
        run_dir=run_dir,
        # from the idle baseline at run start (when there is one): the run-phase panel shows it
        start=min([r["start"] for r in rows] + ([idle["start"]] if idle else [])),
        end=max(r["end"] for r in rows),
        # Just before the last step's end, not its middle: an 8 s step at a 5 s scrape
        # interval may have no scrape between its start and its middle, and then an instant
        # query there finds no cephscope_step_info.
        last_step_middle=last["end"] - 0.5,
        steps=rows,
    )


def prometheus_get(stack: Stack, path: str, params: dict[str, str] | list[tuple[str, str]]) -> Any:
    """`data` of a Prometheus API path ("/api/v1/query", ...); its error fails the test."""
    try:
        return stack.prometheus.get(path.removeprefix("/api/v1/"), params)
    except PrometheusError as exc:
        raise AssertionError(f"{path} {params}: {exc}") from exc


def gateway_figures(rows: Any) -> list[dict[str, Any]]:
    """Per report row (a step's mode): the gateway's own op/s and latency of the mode's op
    kind and its requests/s, as the report computed them (printed by the RGW live tests)."""
    figures = []
    for row in rows:
        system, op = row.system, row.mode
        latency = system.rgw_latency_seconds.get(op)
        requests = system.rgw_requests_per_second
        figures.append({"step": row.step.id, "mode": op, "client_op_s": round(row.figure("iops") or 0),
                        "rgw_op_s": round(system.rgw_ops_per_second.get(op) or 0),
                        "rgw_lat_ms": None if latency is None else round(latency * 1e3, 2),
                        "rgw_req_s": None if requests is None else round(requests)})
    return figures


def step_maxima(stack: Stack, recorded: str, run_id: str, steps: Sequence[str],
                timeout: float = 30) -> dict[str, float]:
    """step -> the largest value a per-step recording rule (`cephscope_step:*`: a figure joined
    with cephscope_step_info) took during the run; waits for the rules' last evaluations to
    land (every 5 s) until each of `steps` has one."""
    query = f'max by (step) (max_over_time({recorded}{{run="{run_id}"}}[30m]))'
    deadline = time.monotonic() + timeout
    while True:
        found = {r["metric"]["step"]: float(r["value"][1])
                 for r in prometheus_get(stack, "/api/v1/query", {"query": query})["result"]}
        if set(steps) <= set(found) or time.monotonic() > deadline:
            return found
        time.sleep(2)
