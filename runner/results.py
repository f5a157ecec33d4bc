"""Results directory of one run; crash-proof so that `--resume` never redoes or loses a step.

Layout:

    RUN_DIR/
      run.json                 run id, spec path, ordered step list (written once, at creation)
      spec.yaml                the spec file as given
      spec.resolved.json       the spec as the runner understood it
      pre_sweep_config.json    config db + running values of touched options before the sweep
      pre_sweep_knobs.json     host knob values (read-ahead, queue, sysctl) before the sweep
      environment.json         versions, config, pools, OSDs, hosts' kernel/sysctl/queues/NICs
      state.json               the run's journal (RunJournal): what it changed on the cluster
                               and has still to undo (pools, profiles, OSD flags, restarts and
                               recovery-test OSDs under way), what it left unrestored
      step-<id>/               one per step (name from the deterministic step id)
        params.json            step params
        <raw tool output>      written by the benchmark
        timestamps.json        config applied / started / ended (unix seconds), dead time
        prometheus.json        system metrics of the step window (with --prometheus-url)
        result.json            parsed results: written LAST; its presence = step done
      summary.json, summary.csv

Every file is written to a temporary name and renamed (atomic on POSIX), so a SIGKILL leaves
either the old file or the new one, never half of one. A step dir without result.json is an
unfinished step: a resumed run clears it and runs the step again.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cephscope.runner.clients import per_client_rows
from cephscope.runner.endpoints.undo import valid_entries
from cephscope.runner.report.step_system import (
    SYSTEM_COLUMNS,
    mode_window,
    read_stored,
    summarize_system,
    system_columns,
)
from cephscope.runner.steps import Step, format_value

RESULT_FILE = "result.json"
FAILURE_FILE = "failure.json"


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    # make the rename itself durable
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def read_json(path: Path) -> Any:
    with open(path) as f:
        return json.load(f)


class ResultsError(RuntimeError):
    pass


# the idle baseline window's Prometheus data (run start, no client I/O), beside the steps'
IDLE_BASELINE_FILE = "idle_baseline.prometheus.json"
JOURNAL_FILE = "state.json"


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _ints(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool)
                                           for v in value)


@dataclass(frozen=True)
class RunJournal:
    """What the run changed on the cluster and has not undone yet, each with its undo (the
    restore and `--resume` read it): written before the change, cleared once undone. The
    pre-sweep ceph config and host settings (the undo of each step's config and knobs) are
    kept beside it, in pre_sweep_config.json and pre_sweep_knobs.json."""
    created_pools: list[str] = field(default_factory=list)  # undo: delete them
    created_erasure_profiles: list[str] = field(default_factory=list)  # undo: remove them
    scrub_flags_set: list[str] = field(default_factory=list)  # OSD flags; undo: unset them
    restarting_osds: list[int] = field(default_factory=list)  # undo: restart them again
    recovery_osds: list[int] = field(default_factory=list)  # undo: mark in, unset noup
    # not a change: the idle baseline window ({"start", "end"}; None: not measured), taken
    # once per run (`idle_baseline_taken`: the file has the key)
    idle_baseline: dict[str, float] | None = None
    idle_baseline_taken: bool = False
    unrestored: list[str] = field(default_factory=list)  # said when a restore gave up
    release: str | None = None  # the release the run rebuilt the dev cluster on last
    # client endpoints' changes beyond the run dir (runner/endpoints/undo.py): mounts on
    # clients, a CephFS's data pool, a filesystem the run made
    endpoints: list[dict[str, str]] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: Any, where: Path) -> RunJournal:
        """The journal in `where`; ResultsError naming the file and key when it is not one."""
        if not isinstance(data, dict):
            raise ResultsError(f"{where}: not a run journal (a JSON object)")
        checks = {"created_pools": _strings, "created_erasure_profiles": _strings,
                  "scrub_flags_set": _strings, "restarting_osds": _ints,
                  "recovery_osds": _ints, "unrestored": _strings,
                  "idle_baseline": lambda v: v is None or (
                      isinstance(v, dict) and all(isinstance(v.get(k), int | float)
                                                  for k in ("start", "end"))),
                  "release": lambda v: v is None or isinstance(v, str),
                  "endpoints": valid_entries}
        problems = [f"{key}: unknown key" for key in data if key not in checks]
        problems += [f"{key}: {data[key]!r}: wrong type" for key, ok in checks.items()
                     if key in data and not ok(data[key])]
        if problems:
            raise ResultsError(f"{where}: not a run journal of this cephscope: "
                               + "; ".join(problems))
        return cls(**data, idle_baseline_taken="idle_baseline" in data)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        if not data.pop("idle_baseline_taken"):
            del data["idle_baseline"]
        return data

class RunDir:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    # ---- creation / loading --------------------------------------------------------------------

    @classmethod
    def create(cls, path: Path, run_id: str, spec_path: Path, spec_text: str,
               resolved: Mapping[str, Any], steps: list[Step],
               meta: Mapping[str, Any] | None = None) -> RunDir:
        path = Path(path)
        if (path / "run.json").exists():
            raise ResultsError(f"{path} already holds a run; use --resume {path} to finish it "
                               f"or choose another --results-dir")
        if path.is_dir() and any(path.iterdir()):
            # e.g. a dev cluster's state dir given by mistake: never write over other files
            raise ResultsError(f"{path} is not empty and not a cephscope run dir; choose an "
                               f"empty or new --results-dir")
        path.mkdir(parents=True, exist_ok=True)
        rd = cls(path)
        atomic_write_text(path / "spec.yaml", spec_text)
        atomic_write_json(path / "spec.resolved.json", resolved)
        # run.json last: its presence means the run dir is complete enough to resume.
        atomic_write_json(path / "run.json", {
            "run_id": run_id,
            "spec_path": str(spec_path),
            "created": time.time(),
            "steps": [s.to_dict() for s in steps],
            **(meta or {}),
        })
        return rd

    def load_run(self) -> dict[str, Any]:
        try:
            return read_json(self.path / "run.json")
        except FileNotFoundError as exc:
            raise ResultsError(f"{self.path} is not a cephscope run dir (no run.json)") from exc
        except ValueError as exc:
            raise ResultsError(f"{self.path}/run.json is corrupt: {exc}") from exc

    def add_step(self, step: Step) -> None:
        """Append a step decided during the run (a search's ask) to run.json, before it runs,
        so a resumed run knows it."""
        run = self.load_run()
        if any(d["id"] == step.id for d in run["steps"]):
            return
        run["steps"].append(step.to_dict())
        atomic_write_json(self.path / "run.json", run)

    def steps(self) -> list[Step]:
        return [Step.from_dict(d) for d in self.load_run()["steps"]]

    @property
    def run_id(self) -> str:
        return str(self.load_run()["run_id"])

    # ---- per-step ------------------------------------------------------------------------------

    def step_dir(self, step: Step) -> Path:
        return self.path / step.dir_name

    def is_done(self, step: Step) -> bool:
        path = self.step_dir(step) / RESULT_FILE
        if not path.exists():
            return False
        try:
            return read_json(path).get("step") == step.id
        except (ValueError, OSError, AttributeError):
            return False

    def begin_step(self, step: Step) -> Path:
        """A clean dir for a step about to run (leftovers of an interrupted attempt removed)."""
        d = self.step_dir(step)
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        atomic_write_json(d / "params.json", step.to_dict())
        return d

    def write_timestamps(self, step: Step, timestamps: Mapping[str, Any]) -> None:
        atomic_write_json(self.step_dir(step) / "timestamps.json", dict(timestamps))

    def write_step_file(self, step: Step, name: str, data: Any) -> None:
        atomic_write_json(self.step_dir(step) / name, data)

    def finish_step(self, step: Step, results: list[dict[str, Any]],
                    timestamps: Mapping[str, Any], config: Mapping[str, Any]) -> None:
        atomic_write_json(self.step_dir(step) / RESULT_FILE, {
            "step": step.id,
            "status": "done",
            "benchmark": step.benchmark,
            "iteration": step.iteration,
            "axes": dict(step.axes),
            "results": results,
            "timestamps": dict(timestamps),
            "config": dict(config),
        })
        (self.step_dir(step) / FAILURE_FILE).unlink(missing_ok=True)

    def fail_step(self, step: Step, error: str, timestamps: Mapping[str, Any]) -> None:
        d = self.step_dir(step)
        d.mkdir(parents=True, exist_ok=True)
        atomic_write_json(d / FAILURE_FILE, {"step": step.id, "status": "failed",
                                             "error": error, "timestamps": dict(timestamps)})

    def step_result(self, step: Step) -> dict[str, Any] | None:
        if not self.is_done(step):
            return None
        return read_json(self.step_dir(step) / RESULT_FILE)

    def step_failure(self, step: Step) -> dict[str, Any] | None:
        path = self.step_dir(step) / FAILURE_FILE
        try:
            return read_json(path)
        except (OSError, ValueError):
            return None

    # ---- run state -----------------------------------------------------------------------------

    def journal(self) -> RunJournal:
        """The run's journal (empty before its first change)."""
        path = self.path / JOURNAL_FILE
        try:
            data = read_json(path)
        except FileNotFoundError:
            return RunJournal()
        except (OSError, ValueError) as exc:
            raise ResultsError(f"{path}: cannot read the run journal: {exc}") from exc
        return RunJournal.from_dict(data, path)

    def record(self, **changes: Any) -> RunJournal:
        """Write these fields of the journal (atomically: a kill leaves the old or the new);
        an unknown field is a TypeError. Writing `idle_baseline` marks it taken."""
        if "idle_baseline" in changes:
            changes.setdefault("idle_baseline_taken", True)
        journal = dataclasses.replace(self.journal(), **changes)
        atomic_write_json(self.path / JOURNAL_FILE, journal.to_dict())
        return journal

    def read_state(self) -> dict[str, Any]:
        """The journal as its file's JSON object (for readers of the file, e.g. the report)."""
        return self.journal().to_dict()

    def update_state(self, **changes: Any) -> None:
        self.record(**changes)

    def write_pre_sweep_config(self, snapshot: Mapping[str, Any]) -> None:
        atomic_write_json(self.path / "pre_sweep_config.json", dict(snapshot))

    def write_environment(self, environment: Mapping[str, Any]) -> None:
        atomic_write_json(self.path / "environment.json", dict(environment))

    def read_environment(self) -> dict[str, Any] | None:
        path = self.path / "environment.json"
        return read_json(path) if path.exists() else None

    def write_pre_sweep_knobs(self, snapshot: list[dict[str, Any]]) -> None:
        atomic_write_json(self.path / "pre_sweep_knobs.json", list(snapshot))

    def read_pre_sweep_knobs(self) -> list[dict[str, Any]] | None:
        path = self.path / "pre_sweep_knobs.json"
        return read_json(path) if path.exists() else None

    def read_pre_sweep_config(self) -> dict[str, Any] | None:
        try:
            return read_json(self.path / "pre_sweep_config.json")
        except (OSError, ValueError):
            return None

    # ---- summary -------------------------------------------------------------------------------

    def summary_rows(self, steps: Iterable[Step]) -> list[dict[str, Any]]:
        rows = []
        for step in steps:
            result = self.step_result(step)
            if result is None:
                failure = self.step_failure(step)
                rows.append({"step": step.id, "benchmark": step.benchmark,
                             "iteration": step.iteration, "axes": dict(step.axes),
                             "status": "failed" if failure else "pending",
                             "error": (failure or {}).get("error"), "mode": None})
                continue
            ts = result.get("timestamps", {})
            prometheus = read_stored(self.step_dir(step) / "prometheus.json")
            for r in result.get("results", []):
                mode = r.get("mode")
                system = summarize_system(prometheus, None, mode_window(result, mode), mode)
                rows.append({
                    "step": step.id, "benchmark": step.benchmark, "iteration": step.iteration,
                    "axes": dict(step.axes), "status": "done", "mode": r.get("mode"),
                    "ceph_version": ts.get("ceph_version"), "iops": r.get("iops"),
                    "bandwidth_bytes_per_second": r.get("bandwidth_bytes_per_second"),
                    "latency_avg_seconds": r.get("latency_avg_seconds"),
                    "latency_max_seconds": r.get("latency_max_seconds"),
                    "latency_p99_seconds": (r.get("latency_percentiles_seconds") or {}).get(
                        "99", (r.get("latency_percentiles_seconds") or {}).get("99.0")),
                    "start": ts.get("started"), "end": ts.get("ended"),
                    "dead_time_seconds": ts.get("dead_time_seconds"),
                    **system_columns(system, r.get("iops"), r.get("bandwidth_bytes_per_second"),
                                     mode),
                })
        return rows

    def write_summary(self, steps: list[Step]) -> dict[str, Any]:
        rows = self.summary_rows(steps)
        run = self.load_run()
        summary = {"run_id": run["run_id"], "spec_path": run.get("spec_path"),
                   "steps_total": len(steps),
                   "steps_done": sum(1 for s in steps if self.is_done(s)),
                   "rows": rows}
        atomic_write_json(self.path / "summary.json", summary)
        axes: list[str] = []
        for s in steps:
            axes += [a for a in s.axes if a not in axes]
        # the version the cluster reported for the step (a sweep across releases differs)
        version = ["ceph_version"] if any(r.get("ceph_version") for r in rows) else []
        columns = ["step", "benchmark", "iteration", *axes, *version, "status", "mode", "iops",
                   "bandwidth_bytes_per_second", "bandwidth_mib_per_second",
                   "latency_avg_seconds", "latency_p99_seconds", "latency_max_seconds",
                   *SYSTEM_COLUMNS, "dead_time_seconds", "start", "end", "error"]
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            flat = {k: v for k, v in row.items() if k != "axes"}
            flat.update({a: format_value(v) for a, v in row["axes"].items()})
            writer.writerow(flat)
        atomic_write_text(self.path / "summary.csv", buf.getvalue())
        self._write_client_summary(steps)
        return summary

    def _write_client_summary(self, steps: list[Step]) -> None:
        """summary-clients.csv: one row per step, mode and client of multi-client steps
        (summary.csv keeps the aggregate row per step)."""
        rows = []
        for step in steps:
            result = self.step_result(step)
            if result is not None:
                rows += per_client_rows(step.id, step.benchmark, result.get("results", []),
                                        result.get("timestamps", {}).get("modes", {}))
        if not rows:
            return
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
        atomic_write_text(self.path / "summary-clients.csv", buf.getvalue())


def load_baseline(run_dir: Path) -> dict[str, dict[str, dict[str, float]]]:
    """step id -> mode -> {iops, latency_avg_seconds, latency_p99_seconds, latency_max_seconds}
    from a finished run dir (its step results, not the summary, so a partial run works too)."""
    rd = RunDir(Path(run_dir))
    baseline: dict[str, dict[str, dict[str, float]]] = {}
    for step in rd.steps():
        result = rd.step_result(step)
        if result is None:
            continue
        for r in result.get("results", []):
            pct = r.get("latency_percentiles_seconds") or {}
            figures = {
                "iops": r.get("iops"),
                "latency_avg_seconds": r.get("latency_avg_seconds"),
                "latency_p99_seconds": pct.get("99", pct.get("99.0")),
                "latency_max_seconds": r.get("latency_max_seconds"),
            }
            baseline.setdefault(step.id, {})[str(r.get("mode"))] = {
                k: float(v) for k, v in figures.items() if isinstance(v, int | float)}
    return baseline


def make_run_id(spec_path: Path) -> str:
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", spec_path.stem)[:40] or "sweep"
    return f"{stem}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"


def rd_run_id(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        return RunDir(path).run_id
    except (ResultsError, KeyError):
        return path.name
