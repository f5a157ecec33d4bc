"""Erasure-code profiles that a pool profile names but the spec does not define: the cluster's
own (CBT's files expect them there). Each one the steps use is looked up at start with `ceph
osd erasure-code-profile get NAME`, a read, before anything changes; one the cluster does not
have refuses the run there, naming the profile and the pool profile. The pool is then created
with the cluster's profile as it is (never changed, never removed by the run).

What the cluster answers is untrusted: k and m must be whole numbers, and the settings are
only ever shown and compared, never made into a command-line option.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from cephscope.runner.cephclient import CephError
from cephscope.runner.spec import PoolProfile, Spec, SpecError
from cephscope.runner.steps import Step

LOOKUP = "ceph osd erasure-code-profile get {}"
# a shown setting of the cluster's profile (anything else is shown as "?")
SHOWN_VALUE = re.compile(r"^[A-Za-z0-9_.,=:/+-]{1,64}$")


class MonCommands(Protocol):
    def command(self, prefix: str, timeout: float | None = None, **args: Any) -> Any: ...


def wanted(spec: Spec, steps: Iterable[Step]) -> dict[str, PoolProfile]:
    """pool profile name -> profile, for the profiles the steps use (their pool, or
    librbdfio's data pool) whose erasure profile is the cluster's."""
    found: dict[str, PoolProfile] = {}
    for step in steps:
        for name in (step.pool_profile, step.params.get("data_pool_profile")):
            profile = spec.pool_profiles.get(str(name)) if name else None
            if profile is not None and profile.cluster_erasure_profile is not None:
                found[profile.name] = profile
    return found


def _whole(reply: Mapping[str, Any], key: str) -> int | None:
    value = reply.get(key)
    text = str(value) if isinstance(value, str | int) and not isinstance(value, bool) else ""
    return int(text) if text.isdigit() and 0 < int(text) <= 256 else None


def _shown(value: Any) -> str:
    text = str(value) if value is not None else ""
    return text if SHOWN_VALUE.match(text) else "?"


def resolved(profile: PoolProfile, reply: Any) -> PoolProfile:
    """The pool profile with the cluster's profile settings; CephError when they hold no
    usable k and m."""
    name = profile.cluster_erasure_profile
    settings = reply if isinstance(reply, Mapping) else {}
    k, m = _whole(settings, "k"), _whole(settings, "m")
    if k is None or m is None:
        raise CephError(f"erasure-code profile {name!r} on the cluster (pool profile "
                        f"{profile.name!r}) has no usable k and m: k={_shown(settings.get('k'))}"
                        f" m={_shown(settings.get('m'))}")
    stripe = _whole(settings, "stripe_unit") if "stripe_unit" in settings else None
    return dataclasses.replace(
        profile, erasure_k=k, erasure_m=m, erasure_plugin=_shown(settings.get("plugin")),
        failure_domain=_shown(settings.get("crush-failure-domain")), stripe_unit=stripe)


def look_up(spec: Spec, steps: Iterable[Step], cli: MonCommands) -> dict[str, PoolProfile]:
    """Every such profile the steps use, with the cluster's settings (reads only). A profile
    the cluster does not have is a SpecError naming it, its pool profile and the line."""
    found: dict[str, PoolProfile] = {}
    problems: list[str] = []
    for name, profile in wanted(spec, steps).items():
        ec = profile.cluster_erasure_profile
        if spec.releases:
            problems.append(
                f"{_where(spec, name)}: {ec!r}: not "
                "defined under erasure_profiles, and a sweep across releases rebuilds the "
                "cluster (which then has no such profile): define it in the spec")
            continue
        try:
            reply = cli.command("osd erasure-code-profile get", name=ec)
        except CephError as exc:
            if "ENOENT" not in str(exc):
                raise
            problems.append(
                f"{_where(spec, name)}: {ec!r}: no such "
                f"erasure-code profile on the cluster (`{LOOKUP.format(ec)}`: ENOENT) and none "
                f"under erasure_profiles: define it in the spec or create it on the cluster")
            continue
        found[name] = resolved(profile, reply)
    if problems:
        raise SpecError(problems)
    return found


def _where(spec: Spec, profile: str) -> str:
    """`FILE:LINE: key.path` of the pool profile's erasure_profile (top level or CBT's
    cluster section)."""
    for base in (("cluster",), ()):
        path = (*base, "pool_profiles", profile, "erasure_profile")
        if path in spec.lines:
            return f"{spec.where(path)}: {'.'.join(path)}"
    return f"{spec.path}: pool_profiles.{profile}.erasure_profile"


def describe(profile: PoolProfile) -> str:
    stripe = f" stripe_unit={profile.stripe_unit}" if profile.stripe_unit else ""
    return (f"k={profile.erasure_k} m={profile.erasure_m} plugin={profile.erasure_plugin} "
            f"crush-failure-domain={profile.failure_domain}{stripe}")


def dry_run_lines(spec: Spec, steps: Iterable[Step], cli: MonCommands | None) -> list[str]:
    """What a dry run says of them: found on the cluster (with its settings), or to be looked
    up at start when there is no cluster to ask. A profile the cluster lacks is a SpecError,
    as in the run."""
    profiles = wanted(spec, steps)
    if not profiles:
        return []
    lines = ["erasure-code profiles the spec names but does not define (the cluster's, used as "
             "they are):"]
    if cli is None:
        return lines + [f"  {p.cluster_erasure_profile} (pool profile {name}): will be looked "
                        f"up on the cluster at start (`{LOOKUP.format(p.cluster_erasure_profile)}`)"
                        for name, p in profiles.items()]
    try:
        found = look_up(spec, steps, cli)
    except CephError as exc:  # not an absent profile (that is a SpecError): no answer
        return lines + [f"  {p.cluster_erasure_profile} (pool profile {name}): could not ask "
                        f"the cluster ({exc}); the run looks it up at start"
                        for name, p in profiles.items()]
    for name, p in found.items():
        lines.append(f"  {p.cluster_erasure_profile} (pool profile {name}): found on the "
                     f"cluster: {describe(p)}")
    return lines
