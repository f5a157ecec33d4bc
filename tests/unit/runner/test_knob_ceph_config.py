"""Config apply / verify / restore against an in-memory model of the mon + OSDs.

The model behaves like Pacific where it matters: `config set` pushes the new value into the
running OSDs' config (so `config get` shows it) even for startup options, whose effect only a
restart brings; `config help` answers ENOENT for unknown options.
"""

from __future__ import annotations

from typing import Any

import pytest

from cephscope.runner.cephclient import CephError
from cephscope.runner.knobs.ceph_config import ConfigManager, ConfigVerifyError, values_equal
from cephscope.runner.restart import ArgvRestart
from tests.unit.runner_fakes import FakeCluster


def manager(cluster: FakeCluster, **kw: Any) -> ConfigManager:
    return ConfigManager(cluster, cluster, lambda i: None, log=lambda m: None,  # type: ignore[arg-type]
                         poll_seconds=0.01, timeout_seconds=5, **kw)


def test_unknown_options_is_a_read():
    cluster = FakeCluster()
    cm = manager(cluster)
    assert cm.unknown_options(["osd_op_num_shards", "osd_no_such_thing"]) == [
        "osd_no_such_thing"]
    assert all(p == "config help" for p, _ in cluster.commands)


def test_startup_option_restarts_runtime_option_does_not():
    cluster = FakeCluster()
    cm = manager(cluster)
    snap = cm.snapshot(["osd_op_num_shards", "osd_max_backfills"])
    report = cm.apply({"osd_max_backfills": 3})
    assert not report.restarted and cluster.restarts == []
    assert report.verified["osd.2"]["osd_max_backfills"] == "3"

    report = cm.apply({"osd_op_num_shards": 4, "osd_max_backfills": 3})
    # config get already says 4 (pushed) but the processes started with 0: restart anyway
    assert report.restarted and cluster.restarts == [[0, 1, 2]]
    assert all(cluster.started_with[i]["osd_op_num_shards"] == "4" for i in range(3))
    # same value again: no restart
    assert not cm.apply({"osd_op_num_shards": 4}).restarted
    assert cluster.restarts == [[0, 1, 2]]

    problems = cm.restore(snap)
    assert problems == []
    assert cluster.db == {}
    assert cluster.restarts == [[0, 1, 2], [0, 1, 2]]
    assert all(cluster.started_with[i]["osd_op_num_shards"] == "0" for i in range(3))


def test_restore_puts_back_a_pre_existing_db_value():
    cluster = FakeCluster()
    cluster.command("config set", who="osd", name="osd_op_num_shards", value="2")
    cluster.restart([0, 1, 2], 1)
    cluster.restarts.clear()
    cm = manager(cluster)
    snap = cm.snapshot(["osd_op_num_shards"])
    assert snap.db == {"osd_op_num_shards": "2"}
    cm.apply({"osd_op_num_shards": 8})
    assert cm.restore(snap) == []
    assert cluster.db == {"osd_op_num_shards": "2"}
    assert all(cluster.started_with[i]["osd_op_num_shards"] == "2" for i in range(3))


def test_rolling_restarts_one_osd_at_a_time():
    cluster = FakeCluster()
    cm = manager(cluster, rolling=True)
    cm.snapshot(["osd_op_num_shards"])
    cm.apply({"osd_op_num_shards": 2})
    assert cluster.restarts == [[0], [1], [2]]


def test_value_that_does_not_take_fails_clearly():
    cluster = FakeCluster()
    cluster.restart_ignores_db = True
    cm = manager(cluster)
    cm.snapshot(["osd_op_num_shards"])

    # make config get honest about the process (as after a restart that ignored the db)
    def set_without_push(prefix: str, timeout: float | None = None, **args: Any) -> Any:
        if prefix == "config set":
            cluster.db[args["name"]] = args["value"]
            return None
        return FakeCluster.command(cluster, prefix, timeout, **args)

    cluster.command = set_without_push  # type: ignore[method-assign]
    with pytest.raises(ConfigVerifyError) as info:
        cm.verify({"osd_op_num_shards": 4}, wait_seconds=0.05)
    assert "osd.0: osd_op_num_shards=0 (wanted 4)" in str(info.value)


def test_resumed_run_without_knowledge_restarts_once():
    cluster = FakeCluster()
    # a killed run left the db at 4 and the OSDs running 2
    cluster.command("config set", who="osd", name="osd_op_num_shards", value="2")
    cluster.restart([0, 1, 2], 1)
    cluster.command("config set", who="osd", name="osd_op_num_shards", value="4")
    cluster.restarts.clear()
    cm = manager(cluster)  # no snapshot in this process: nothing known about the processes
    assert cm.apply({"osd_op_num_shards": 4}).restarted
    assert not cm.apply({"osd_op_num_shards": 4}).restarted
    assert cluster.restarts == [[0, 1, 2]]


def test_restart_needed_without_method_is_an_error():
    cluster = FakeCluster()
    cm = ConfigManager(cluster, None, lambda i: None, log=lambda m: None,  # type: ignore[arg-type]
                       poll_seconds=0.01)
    with pytest.raises(CephError, match="no restart method"):
        cm.apply({"osd_op_num_shards": 4})


def test_argv_restart_substitutes_id_without_shell(tmp_path):
    marker = tmp_path / "restarted"
    method = ArgvRestart("command", ["/bin/sh", "-c", 'echo "$0" >> ' + str(marker), "{id};x"])
    assert method.argv_for(7)[-1] == "7;x"  # substituted into one argv element, not parsed
    method.restart([1, 2], 10)
    assert sorted(marker.read_text().split()) == ["1;x", "2;x"]
    failing = ArgvRestart("command", ["/bin/false", "{id}"])
    with pytest.raises(CephError, match=r"osd\.3: /bin/false 3 failed"):
        failing.restart([3], 10)


@pytest.mark.parametrize(
    ("expected", "running", "kind", "same"),
    [(4, "4", "int", True), (4, "4.0", "int", True), (True, "true", "bool", True),
     (False, "true", "bool", False), (0.5, "0.500000", "float", True), ("wpq", "wpq", "str", True),
     ("wpq", "mclock_scheduler", "str", False), (4, "8", "int", False)],
)
def test_values_equal(expected, running, kind, same):
    assert values_equal(expected, running, kind) is same


def test_restore_waits_for_an_osd_that_does_not_answer_for_a_moment():
    """An OSD crashed and restarting while the sweep restores: asked again, not given up."""

    class FlakyCluster(FakeCluster):
        silent_answers = 0

        def json(self, *args: str, timeout: float | None = None) -> Any:
            if args[1] == "osd.1" and self.silent_answers > 0:
                self.silent_answers -= 1
                raise CephError("osd.1: connection refused")
            return super().json(*args, timeout=timeout)

    cluster = FlakyCluster()
    cm = manager(cluster)
    snap = cm.snapshot(["osd_max_backfills"])
    cm.apply({"osd_max_backfills": 3})
    cluster.silent_answers = 4
    assert cm.restore(snap) == []
    assert cluster.db == {} and cluster.silent_answers == 0


def test_apply_waits_for_an_osd_that_does_not_answer_for_a_moment():
    """An OSD restarting after a crash while a step applies its config: the step waits for it
    (within the verify window) instead of failing, and so does every step after it."""

    class FlakyCluster(FakeCluster):
        silent_answers = 0

        def json(self, *args: str, timeout: float | None = None) -> Any:
            if args[1] == "osd.2" and self.silent_answers > 0:
                self.silent_answers -= 1
                raise CephError("osd.2: connection refused")
            return super().json(*args, timeout=timeout)

    cluster = FlakyCluster()
    cm = manager(cluster)
    cm.snapshot(["osd_max_backfills"])
    cluster.silent_answers = 5
    report = cm.apply({"osd_max_backfills": 3})
    assert report.verified["osd.2"]["osd_max_backfills"] == "3"
    assert cluster.silent_answers == 0


def test_snapshot_resolves_zero_to_the_variant_of_each_osds_store():
    cluster = FakeCluster()
    cluster.rotational = {1}
    cm = manager(cluster)
    snap = cm.snapshot(["osd_op_num_shards", "osd_max_backfills"])
    assert snap.running["osd_op_num_shards"] == {"osd.0": "0", "osd.1": "0", "osd.2": "0"}
    shards = snap.effective["osd_op_num_shards"]
    assert shards["osd.0"] == {"value": "8", "from": "osd_op_num_shards_ssd"}
    assert shards["osd.1"] == {"value": "5", "from": "osd_op_num_shards_hdd"}
    # an option without variants is its own effective value
    assert snap.effective["osd_max_backfills"]["osd.2"] == {"value": "1",
                                                           "from": "osd_max_backfills"}
    # stored and read back with the run (pre_sweep_config.json)
    assert type(snap).from_dict(snap.to_dict()) == snap
