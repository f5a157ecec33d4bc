"""Pools per pool profile: created (or reused when they already match) and removed at the end.

Pool names are `cephscope-<profile>`; an erasure profile `cephscope-<profile>` holds k/m and the
failure domain (osd by default, so a 3-OSD single-host cluster can hold k=2,m=1). A pool profile
naming an erasure profile the spec does not define gets the cluster's profile of that name, used
as it is and never removed (runner/cluster_erasure_profiles.py looks it up at start).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cephscope.runner.cephclient import CephCli, CephError
from cephscope.runner.spec import PoolProfile

Log = Callable[[str], None]


def pool_name_for(profile: str) -> str:
    return "cephscope-" + re.sub(r"[^A-Za-z0-9_.-]", "_", profile)


@dataclass
class PoolManager:
    cli: CephCli
    log: Log = print
    created: list[str] = field(default_factory=list)
    erasure_profiles_created: list[str] = field(default_factory=list)
    # called with (pools, erasure profiles) BEFORE anything is created, so that a run killed
    # right after a create still knows what to remove when resumed
    record: Callable[[list[str], list[str]], None] = lambda pools, profiles: None

    def _remember(self, pool: str | None = None, ec_profile: str | None = None) -> None:
        if pool and pool not in self.created:
            self.created.append(pool)
        if ec_profile and ec_profile not in self.erasure_profiles_created:
            self.erasure_profiles_created.append(ec_profile)
        self.record(list(self.created), list(self.erasure_profiles_created))

    def existing_pools(self) -> dict[str, dict]:
        pools = self.cli.command("osd pool ls", detail="detail") or []
        return {p["pool_name"]: p for p in pools}

    def ensure(self, profile: PoolProfile, application: str = "rados",
               overwrites: bool = False) -> str:
        """The pool for this profile, created if missing; an existing pool must match.
        `overwrites`: an EC pool that RBD writes data to needs allow_ec_overwrites."""
        name = pool_name_for(profile.name)
        pools = self.existing_pools()
        if name in pools:
            self._check_matches(name, pools[name], profile)
            if overwrites and profile.is_erasure and \
                    "ec_overwrites" not in str(pools[name].get("flags_names", "")):
                self.cli.command("osd pool set", pool=name, var="allow_ec_overwrites", val="true")
            self.log(f"pool {name}: reusing the existing pool")
            return name
        pg = profile.pg_num
        if profile.is_erasure and profile.cluster_erasure_profile:
            ec_name = profile.cluster_erasure_profile
            self._remember(pool=name)  # the profile is the cluster's: not ours to remove
        elif profile.is_erasure:
            ec_name = name
            self._remember(pool=name, ec_profile=ec_name)
            settings = [f"k={profile.erasure_k}", f"m={profile.erasure_m}",
                        f"plugin={profile.erasure_plugin}",
                        f"crush-failure-domain={profile.failure_domain}"]
            if profile.stripe_unit:
                settings.append(f"stripe_unit={profile.stripe_unit}")
            self.cli.command("osd erasure-code-profile set", name=ec_name, profile=settings,
                             force=True)
        if profile.is_erasure:
            self.cli.command("osd pool create", pool=name, pg_num=pg, pgp_num=pg,
                             pool_type="erasure", erasure_code_profile=ec_name)
            if profile.ec_overwrites or overwrites:
                self.cli.command("osd pool set", pool=name, var="allow_ec_overwrites", val="true")
        else:
            self._remember(pool=name)
            self.cli.command("osd pool create", pool=name, pg_num=pg, pgp_num=pg,
                             pool_type="replicated")
            size = str(profile.replication)
            self.cli.command("osd pool set", pool=name, var="size", val=size,
                             yes_i_really_mean_it=True)
            replicas = profile.replication or 1
            # Ceph's own default: size - size/2 (3 -> 2, 2 -> 1, 1 -> 1)
            self.cli.command("osd pool set", pool=name, var="min_size",
                             val=str(max(1, replicas - replicas // 2)))
        self.cli.command("osd pool application enable", pool=name, app=application,
                         yes_i_really_mean_it=True)
        self.log(f"pool {name}: created ({self.describe(profile)})")
        return name

    def describe_pools(self, names: list[str]) -> dict[str, Any]:
        """What a step ran on: each pool's `osd pool ls detail` entry and its EC profile."""
        pools = self.existing_pools()
        found: dict[str, Any] = {}
        for name in names:
            entry = dict(pools.get(name, {}))
            ec = entry.get("erasure_code_profile")
            if entry.get("type") == 3 and ec:
                entry["erasure_code_profile_settings"] = self.cli.command(
                    "osd erasure-code-profile get", name=ec)
            found[name] = entry
        return found

    @staticmethod
    def describe(profile: PoolProfile) -> str:
        if profile.is_erasure and profile.cluster_erasure_profile:
            return (f"erasure, the cluster's profile {profile.cluster_erasure_profile} "
                    f"(k={profile.erasure_k} m={profile.erasure_m}), {profile.pg_num} PGs")
        if profile.is_erasure:
            return f"erasure k={profile.erasure_k} m={profile.erasure_m}, {profile.pg_num} PGs"
        return f"replicated size {profile.replication}, {profile.pg_num} PGs"

    def _check_matches(self, name: str, pool: dict, profile: PoolProfile) -> None:
        # pool type: 1 replicated, 3 erasure
        if profile.is_erasure:
            if pool.get("type") != 3:
                raise CephError(f"pool {name} exists but is not erasure-coded; remove it or "
                                f"rename the pool profile {profile.name!r}")
            ec = profile.cluster_erasure_profile
            if ec and pool.get("erasure_code_profile") != ec:
                raise CephError(f"pool {name} exists with erasure-code profile "
                                f"{pool.get('erasure_code_profile')!r}, pool profile "
                                f"{profile.name!r} wants the cluster's {ec!r}")
            want = (profile.erasure_k or 0) + (profile.erasure_m or 0)
            if int(pool.get("size", want)) != want:
                raise CephError(f"pool {name} exists with size {pool.get('size')}, profile "
                                f"{profile.name!r} wants k+m={want}")
        else:
            if pool.get("type") != 1:
                raise CephError(f"pool {name} exists but is not replicated")
            if int(pool.get("size", 0)) != profile.replication:
                raise CephError(f"pool {name} exists with size {pool.get('size')}, profile "
                                f"{profile.name!r} wants {profile.replication}")

    def ensure_named(self, name: str, application: str = "rados") -> str:
        """A pool given by name (no profile): reused, or created with the cluster's defaults."""
        if name in self.existing_pools():
            return name
        self._remember(pool=name)
        self.cli.command("osd pool create", pool=name, pg_num=32, pgp_num=32,
                         pool_type="replicated")
        self.cli.command("osd pool application enable", pool=name, app=application,
                         yes_i_really_mean_it=True)
        self.log(f"pool {name}: created (cluster default size, 32 PGs)")
        return name

    def remove_created(self) -> list[str]:
        """Delete the pools (and EC profiles) this run created, and the crush rules Ceph made
        for its erasure-coded pools; return problems."""
        problems = []
        existing = self.existing_pools()
        removed_ec: dict[str, int] = {}  # EC pool -> its crush rule id
        for name in reversed(self.created):
            if name not in existing:
                continue
            try:
                self.cli.command("osd pool delete", pool=name, pool2=name,
                                 yes_i_really_really_mean_it=True)
                self.log(f"pool {name}: removed")
                if existing[name].get("type") == 3 and "crush_rule" in existing[name]:
                    removed_ec[name] = existing[name]["crush_rule"]
            except CephError as exc:
                problems.append(f"remove pool {name}: {exc}")
        self.created.clear()
        if removed_ec:
            problems += self._remove_pool_rules(removed_ec, existing)
        for ec in reversed(self.erasure_profiles_created):
            try:
                self.cli.command("osd erasure-code-profile rm", name=ec)
            except CephError as exc:
                problems.append(f"remove erasure profile {ec}: {exc}")
        self.erasure_profiles_created.clear()
        self.record([], [])
        return problems

    def _remove_pool_rules(self, removed: dict[str, int], existing: dict[str, dict]
                           ) -> list[str]:
        """`osd pool create ... erasure` makes a crush rule named after the pool, which
        outlives it: remove the rule of each EC pool we deleted when it still bears that pool's
        name and no remaining pool uses it (a rule someone else made or shares stays)."""
        in_use = {pool.get("crush_rule") for name, pool in existing.items()
                  if name not in removed}
        try:
            rules = {rule["rule_id"]: rule["rule_name"]
                     for rule in self.cli.command("osd crush rule dump") or []}
        except CephError as exc:
            return [f"list crush rules: {exc}"]
        problems = []
        for pool, rule_id in removed.items():
            if rules.get(rule_id) != pool or rule_id in in_use:
                continue
            try:
                self.cli.command("osd crush rule rm", name=pool)
                self.log(f"crush rule {pool}: removed")
            except CephError as exc:
                problems.append(f"remove crush rule {pool}: {exc}")
        return problems
