"""threads collector: /proc parsing on a real OSD's captured /proc tree, counters, pid lookup."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from cephscope.exporter.asok import Daemon
from cephscope.exporter.collectors.threads import (
    MAX_THREAD_GROUPS,
    OTHER_GROUP,
    ProcessSnapshot,
    ThreadCpuAccount,
    ThreadsCollector,
    ThreadsSettings,
    find_osd_pid,
    parse_stat,
    read_process,
    thread_group,
)
from cephscope.exporter.exposition import MetricSink, render_labels
from cephscope.exporter.settings import HostSettings, PathSettings
from tests.unit.fake_asok import FakeCluster, capture_dir, only_collectors, parse_samples, scrape_once

PROC_FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "proc"
BEFORE = PROC_FIXTURES / "ops_load_before"
AFTER = PROC_FIXTURES / "ops_load_after"
THREADS = only_collectors("threads")
CLK_TCK = 100  # the capture machine's sysconf(SC_CLK_TCK)
PAGE = 4096


def osd_pids(root: Path) -> dict[str, int]:
    """osd id -> pid of the captured tree, read from the captured command lines."""
    found = {}
    for pid_dir in root.iterdir():
        argv = (pid_dir / "cmdline").read_bytes().split(b"\0")
        flag = b"-i" if b"-i" in argv else b"--id"
        found[argv[argv.index(flag) + 1].decode()] = int(pid_dir.name)
    return found


def config(osd: str, option: str) -> int:
    doc = json.loads((capture_dir("ops_load", osd) / f"config_get.{option}.json").read_bytes())
    return int(doc[option])


@pytest.mark.parametrize(
    ("comm", "group"),
    [
        ("tp_osd_tp", "tp_osd_tp"),
        ("msgr-worker-0", "msgr-worker"),
        ("msgr-worker-12", "msgr-worker"),
        ("rocksdb:low0", "rocksdb:low"),
        ("rocksdb:high0", "rocksdb:high"),
        ("bstore_kv_sync", "bstore_kv_sync"),
        ("safe_timer", "safe_timer"),
        ("rocksdb:dump_st", "rocksdb:dump_st"),
        ("1234", "1234"),
    ],
)
def test_thread_group(comm: str, group: str) -> None:
    assert thread_group(comm) == group


def test_parse_stat_with_odd_comm() -> None:
    line = "42 (a) b (c)) S 1 1 1 0 -1 4194560 0 0 0 0 150 25 0 0 20 0 9 0 777 0 0"
    fields = parse_stat(line)
    assert (fields.comm, fields.utime, fields.stime, fields.starttime) == ("a) b (c)", 150, 25, 777)


@pytest.mark.parametrize("line", ["", "42 tp_osd_tp S 1", "42 (x) S 1 2 3", "42 (x) " + "y " * 30])
def test_parse_stat_rejects_garbage(line: str) -> None:
    with pytest.raises(ValueError):
        parse_stat(line)


@pytest.mark.parametrize("osd", ["osd.0", "osd.1"])
def test_real_osd_process(osd: str) -> None:
    pid = osd_pids(AFTER)[osd.split(".")[1]]
    snap = read_process(AFTER, pid, PAGE)
    assert len(snap.threads) == len(list((AFTER / str(pid) / "task").iterdir()))
    statm_pages = int((AFTER / str(pid) / "statm").read_text().split()[1])
    assert snap.rss_bytes == statm_pages * PAGE
    status_rss = next(
        line for line in (AFTER / str(pid) / "status").read_text().splitlines()
        if line.startswith("VmRSS:")
    )
    assert abs(snap.rss_bytes / 1024 - int(status_rss.split()[1])) < 64  # same thing, kB
    groups: dict[str, int] = {}
    for comm, _ in snap.threads.values():
        groups[thread_group(comm)] = groups.get(thread_group(comm), 0) + 1
    # One tp_osd_tp thread per shard per thread-per-shard (hdd defaults on this OSD).
    shards = config(osd, "osd_op_num_shards") or config(osd, "osd_op_num_shards_hdd")
    per_shard = config(osd, "osd_op_num_threads_per_shard") or config(
        osd, "osd_op_num_threads_per_shard_hdd"
    )
    assert groups["tp_osd_tp"] == shards * per_shard
    assert groups["msgr-worker"] >= 1 and "bstore_kv_sync" in groups
    # Threads' CPU never exceeds the process's (which also has exited threads' time).
    assert sum(ticks for _, ticks in snap.threads.values()) <= snap.cpu_ticks


def _collector(proc_root: Path) -> ThreadsCollector:
    host = HostSettings(paths=PathSettings(procfs=str(proc_root)))
    return ThreadsCollector(ThreadsSettings(min_interval=0), host=host, clk_tck=CLK_TCK,
                            page_size=PAGE)


class _Session:
    def __init__(self, name: str, pid: int | None, asok: str = "/nonexistent") -> None:
        self.daemon = Daemon(name, "osd", name.split(".")[1], "ceph", asok)
        self.daemon_label = render_labels({"ceph_daemon": name})
        self._pid = pid

    def pid(self) -> int | None:
        return self._pid

    def command(self, prefix: str, **_: Any) -> Any:
        raise AssertionError(f"threads collector sent {prefix!r}")


def _collect(collector: ThreadsCollector, session: _Session) -> dict[str, float]:
    sink = MetricSink()
    collector.collect_daemon(session, sink)  # type: ignore[arg-type]
    values = {}
    for fam in sink.families.values():
        for name, labels, value in fam.samples:
            values[f"{name}{{{labels}}}"] = value
    return values


def _cpu(values: dict[str, float], osd: str, group: str) -> float:
    return values[
        f'cephscope_osd_thread_cpu_seconds_total{{ceph_daemon="{osd}",thread_group="{group}"}}'
    ]


@pytest.mark.parametrize("osd", ["osd.0", "osd.1"])
def test_tp_osd_tp_cpu_grows_under_load(osd: str) -> None:
    pid = osd_pids(AFTER)[osd.split(".")[1]]
    assert osd_pids(BEFORE)[osd.split(".")[1]] == pid
    collector = _collector(BEFORE)
    before = _collect(collector, _Session(osd, pid))
    collector.proc_root = str(AFTER)
    after = _collect(collector, _Session(osd, pid))
    assert _cpu(after, osd, "tp_osd_tp") > _cpu(before, osd, "tp_osd_tp")
    for key, value in before.items():
        if key.startswith("cephscope_osd_thread_cpu_seconds_total"):
            assert after[key] >= value, f"{key} went down"
    label = f'{{ceph_daemon="{osd}"}}'
    assert after[f"cephscope_osd_cpu_seconds_total{label}"] > before[
        f"cephscope_osd_cpu_seconds_total{label}"
    ]
    assert after[f"cephscope_osd_threads{label}"] == len(read_process(AFTER, pid, PAGE).threads)
    assert after[f"cephscope_osd_resident_memory_bytes{label}"] > 0


def test_min_interval_serves_the_last_read_and_a_new_pid_reads_at_once(
        tmp_path: Path) -> None:
    pids = osd_pids(AFTER)
    root = tmp_path / "proc"
    shutil.copytree(AFTER, root)
    host = HostSettings(paths=PathSettings(procfs=str(root)))
    collector = ThreadsCollector(ThreadsSettings(min_interval=3600), host=host,
                                 clk_tck=CLK_TCK, page_size=PAGE)
    first = _collect(collector, _Session("osd.0", pids["0"]))
    # /proc now says more CPU: within the interval the last read is served, not re-read.
    shutil.rmtree(root / str(pids["0"]))
    shutil.copytree(BEFORE / str(pids["0"]), root / str(pids["0"]))
    (root / str(pids["0"]) / "task").rename(root / "hidden-task")
    assert _collect(collector, _Session("osd.0", pids["0"])) == first
    # Another pid behind the socket (a restarted OSD): read at once.
    other = _collect(collector, _Session("osd.0", pids["1"]))
    assert other['cephscope_osd_threads{ceph_daemon="osd.0"}'] == len(
        read_process(root, pids["1"], PAGE).threads)
    assert other != first


def _snap(threads: dict[int, tuple[str, int]], pid: int = 1, start: int = 10) -> ProcessSnapshot:
    return ProcessSnapshot(pid, start, sum(t for _, t in threads.values()), 0, threads)


def test_exited_threads_keep_their_cpu_in_the_counter() -> None:
    account = ThreadCpuAccount(1, 10)
    totals, _ = account.update(_snap({11: ("tp_osd_tp", 500), 12: ("tp_osd_tp", 300)}))
    assert totals["tp_osd_tp"] == 800
    totals, live = account.update(_snap({11: ("tp_osd_tp", 520)}))  # 12 exited
    assert totals["tp_osd_tp"] == 820 and live["tp_osd_tp"] == 1
    totals, _ = account.update(_snap({11: ("tp_osd_tp", 530), 13: ("tp_osd_tp", 5)}))
    assert totals["tp_osd_tp"] == 835


def test_thread_groups_are_bounded() -> None:
    account = ThreadCpuAccount(1, 10)
    threads = {i: (f"weird{chr(65 + i % 26)}{chr(65 + i // 26)}x", 1) for i in range(200)}
    totals, _ = account.update(_snap(threads))
    assert len(totals) == MAX_THREAD_GROUPS + 1 and totals[OTHER_GROUP] == 200 - MAX_THREAD_GROUPS


def test_restarted_osd_starts_a_new_account(tmp_path: Path) -> None:
    pid = osd_pids(AFTER)["0"]
    root = tmp_path / "proc"
    shutil.copytree(AFTER / str(pid), root / str(pid))
    collector = _collector(root)
    first = _collect(collector, _Session("osd.0", pid))
    # Same pid, new life: starttime (field 22) changes, CPU restarts from near zero.
    stat = root / str(pid) / "stat"
    head, _, tail = stat.read_text().rpartition(")")
    fields = tail.split()
    fields[11], fields[12], fields[19] = "1", "1", str(int(fields[19]) + 1000)
    stat.write_text(f"{head}) {' '.join(fields)}\n")
    for task in (root / str(pid) / "task").iterdir():
        task_head, _, task_tail = (task / "stat").read_text().rpartition(")")
        task_fields = task_tail.split()
        task_fields[11], task_fields[12] = "0", "0"
        (task / "stat").write_text(f"{task_head}) {' '.join(task_fields)}\n")
    second = _collect(collector, _Session("osd.0", pid))
    assert _cpu(first, "osd.0", "tp_osd_tp") > 0
    assert _cpu(second, "osd.0", "tp_osd_tp") == 0  # a counter reset, not exited-thread credit


CAPTURED_UID = 0  # the captured OSDs ran as root (Uid line of their status)


def test_pid_lookup_by_command_line(tmp_path: Path) -> None:
    pids = osd_pids(AFTER)
    assert find_osd_pid(AFTER, "0", CAPTURED_UID) == pids["0"]
    assert find_osd_pid(AFTER, "1", CAPTURED_UID) == pids["1"]
    with pytest.raises(ValueError, match="no ceph-osd processes with --id 7"):
        find_osd_pid(AFTER, "7", CAPTURED_UID)
    # Two clusters on one host, both with an osd.0: refuse to guess.
    root = tmp_path / "proc"
    shutil.copytree(AFTER, root)
    shutil.copytree(AFTER / str(pids["0"]), root / "99999")
    with pytest.raises(ValueError, match=r"2 \(\[\d+, 99999\]\) ceph-osd processes with --id 0"):
        find_osd_pid(root, "0", CAPTURED_UID)


def _spoof(root: Path, template_pid: int, pid: int, uid: int) -> None:
    """A process of ``uid`` whose argv, comm and threads are a copy of a real OSD's."""
    shutil.copytree(AFTER / str(template_pid), root / str(pid))
    status = root / str(pid) / "status"
    status.write_text("".join(
        f"Uid:\t{uid}\t{uid}\t{uid}\t{uid}\n" if line.startswith("Uid:") else line
        for line in status.read_text().splitlines(keepends=True)
    ))


def test_fallback_ignores_processes_not_run_by_the_sockets_owner(tmp_path: Path) -> None:
    pids = osd_pids(AFTER)
    root = tmp_path / "proc"
    shutil.copytree(AFTER, root)
    # Another local user starts "ceph-osd --id 0" (any argv can be faked).
    _spoof(root, pids["0"], 99999, uid=1000)
    asok = tmp_path / "ceph-osd.0.asok"
    asok.touch()
    assert asok.stat().st_uid == CAPTURED_UID
    assert find_osd_pid(root, "0", CAPTURED_UID) == pids["0"]
    collector = _collector(root)
    values = _collect(collector, _Session("osd.0", None, str(asok)))
    expected = len(read_process(root, pids["0"], PAGE).threads)
    assert values['cephscope_osd_threads{ceph_daemon="osd.0"}'] == expected
    # The socket belongs to uid 1000: the real (root) OSD is not taken for it, nor is
    # anything taken when the owner cannot be read.
    with pytest.raises(ValueError, match=r"of uid 1000 \(the admin socket's owner\)"):
        find_osd_pid(root, "1", 1000)
    with pytest.raises(ValueError, match="cannot read the socket's owner"):
        _collect(_collector(root), _Session("osd.1", None, str(tmp_path / "gone.asok")))


def test_kept_fallback_pid_is_dropped_when_its_owner_changes(tmp_path: Path) -> None:
    pids = osd_pids(AFTER)
    root = tmp_path / "proc"
    shutil.copytree(AFTER, root)
    asok = tmp_path / "ceph-osd.1.asok"
    asok.touch()
    collector = _collector(root)
    _collect(collector, _Session("osd.1", None, str(asok)))
    # The OSD exits and another user's look-alike gets its pid: scan again, find nothing.
    shutil.rmtree(root / str(pids["1"]))
    _spoof(root, pids["1"], pids["1"], uid=1000)
    with pytest.raises(ValueError, match="no ceph-osd processes with --id 1 of uid 0"):
        _collect(collector, _Session("osd.1", None, str(asok)))


def test_socket_pid_is_used_when_it_is_an_osd() -> None:
    pids = osd_pids(AFTER)
    collector = _collector(AFTER)
    # The socket says osd.1's pid although the name says osd.0: the socket wins.
    values = _collect(collector, _Session("osd.0", pids["1"]))
    expected = len(read_process(AFTER, pids["1"], PAGE).threads)
    assert values['cephscope_osd_threads{ceph_daemon="osd.0"}'] == expected


def test_through_fake_sockets_with_a_missing_process(tmp_path: Path) -> None:
    # The fake daemons run in this test process, so SO_PEERCRED names a python process that
    # is not under the fixture proc root: the collector falls back to the command lines.
    cluster = FakeCluster(tmp_path / "run")
    for i in (0, 1, 5):
        cluster.add_osd(i, scenario="ops_load", source_osd=f"osd.{i % 2}")
    try:
        text = scrape_once(
            tmp_path / "run", *THREADS, "--path.procfs", str(AFTER)
        )
    finally:
        cluster.stop()
    samples = parse_samples(text)
    for osd in ("osd.0", "osd.1"):
        assert samples[f'cephscope_osd_threads{{ceph_daemon="{osd}"}}'] > 10
    # osd.5 has no process under the proc root: its series are gone, the others' intact.
    assert not any('ceph_daemon="osd.5"' in k and "osd_thread" in k for k in samples)
    assert samples['cephscope_scrape_collector_success{collector="threads"}'] == 0


def test_fallback_pid_is_kept_while_it_is_still_that_osd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cephscope.exporter.collectors import threads as threads_module

    pids = osd_pids(AFTER)
    root = tmp_path / "proc"
    shutil.copytree(AFTER, root)
    scans: list[str] = []
    real_find = threads_module.find_osd_pid

    def counting_find(proc_root: Any, osd_id: str, owner_uid: int) -> int:
        scans.append(osd_id)
        return real_find(proc_root, osd_id, owner_uid)

    monkeypatch.setattr(threads_module, "find_osd_pid", counting_find)
    collector = _collector(root)
    asok = tmp_path / "ceph-osd.1.asok"
    asok.touch()
    for _ in range(3):  # the socket's pid is not visible: fallback to command lines
        values = _collect(collector, _Session("osd.1", None, str(asok)))
    assert scans == ["1"], "one scan, then the kept pid"
    assert values['cephscope_osd_threads{ceph_daemon="osd.1"}'] > 10
    # osd.1 went away (its pid is gone): scan again, and fail clearly.
    shutil.rmtree(root / str(pids["1"]))
    with pytest.raises(ValueError, match="no ceph-osd processes with --id 1"):
        _collect(collector, _Session("osd.1", None, str(asok)))
    assert scans == ["1", "1"]


def test_opqueue_ops_threads_exposition_passes_promtool(tmp_path: Path) -> None:
    import subprocess

    promtool = shutil.which("promtool")
    assert promtool, "promtool (Debian package prometheus) is required: bash deploy/install.sh"
    cluster = FakeCluster(tmp_path / "run")
    for i in range(2):
        cluster.add_osd(i, scenario="ops_load")
    try:
        text = scrape_once(tmp_path / "run", *only_collectors("opqueue", "ops", "threads"),
                           "--path.procfs", str(AFTER))
    finally:
        cluster.stop()
    assert "cephscope_osd_thread_cpu_seconds_total{" in text
    assert "cephscope_osd_op_queue_items{" in text
    proc = subprocess.run([promtool, "check", "metrics"], input=text.encode(),
                          capture_output=True, timeout=60)
    findings = (proc.stdout + proc.stderr).decode().strip()
    assert proc.returncode == 0 and not findings, findings
