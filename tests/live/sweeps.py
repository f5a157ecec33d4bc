"""Running `cephscope sweep` for real against the session cluster and stack, and asking
Prometheus about it."""

from __future__ import annotations

import json
import subprocess
import sys
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
) -> SweepRun:
    """Run `cephscope sweep` for real with the stack scraping its metrics endpoint."""
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
        # from the idle baseline at run start: the run-phase panel shows it
        start=min(idle["start"], *(r["start"] for r in rows)),
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
