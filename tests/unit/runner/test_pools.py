"""PoolManager: what a run creates it removes, and nothing else (on the in-memory cluster)."""

from __future__ import annotations

from cephscope.runner.pools import PoolManager
from cephscope.runner.spec import PoolProfile
from tests.unit.runner_fakes import FakeCluster

EC = PoolProfile("ec21", None, pg_num=8, erasure_k=2, erasure_m=1)
REP = PoolProfile("rep1", 1, pg_num=8)


def test_removing_an_ec_pool_removes_the_crush_rule_ceph_made_for_it() -> None:
    cluster = FakeCluster()
    pools = PoolManager(cluster, log=lambda m: None)  # type: ignore[arg-type]
    ec_pool = pools.ensure(EC)
    pools.ensure(REP)
    assert ec_pool in cluster.crush_rules.values()

    assert pools.remove_created() == []

    assert cluster.pools == {}
    assert cluster.crush_rules == {0: "replicated_rule"}
    assert cluster.ec_profiles == {}


def test_a_rule_another_pool_uses_or_someone_else_named_stays() -> None:
    cluster = FakeCluster()
    pools = PoolManager(cluster, log=lambda m: None)  # type: ignore[arg-type]
    ec_pool = pools.ensure(EC)
    rule = cluster.pools[ec_pool]["crush_rule"]
    # a pool that is not the run's, on the same rule
    cluster.pools["theirs"] = {"type": 3, "size": 3, "crush_rule": rule}

    assert pools.remove_created() == []

    assert cluster.crush_rules[rule] == ec_pool
    assert "theirs" in cluster.pools
    removes = [args for prefix, args in cluster.commands if prefix == "osd crush rule rm"]
    assert removes == []


def test_a_rule_renamed_since_is_not_the_pools_to_remove() -> None:
    cluster = FakeCluster()
    pools = PoolManager(cluster, log=lambda m: None)  # type: ignore[arg-type]
    ec_pool = pools.ensure(EC)
    rule = cluster.pools[ec_pool]["crush_rule"]
    cluster.crush_rules[rule] = "operators-rule"

    assert pools.remove_created() == []

    assert cluster.crush_rules[rule] == "operators-rule"
