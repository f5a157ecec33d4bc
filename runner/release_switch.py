"""A sweep across Ceph releases: the release axis needs a dev cluster that can be rebuilt on
each release named (the CLI hands its switch in the target)."""

from __future__ import annotations

from cephscope.runner.cephclient import CephTarget
from cephscope.runner.spec import Spec, SpecError


def check_releases(spec: Spec, target: CephTarget, dry_run: bool) -> None:
    """Before anything changes: every release named must be one the dev cluster can run (its
    root filesystem built now if missing, unless a dry run)."""
    if not spec.releases:
        return
    where = spec.where(("devcluster", "release"))
    switch = target.releases
    if switch is None:
        raise SpecError([f"{where}: devcluster.release: {list(spec.releases)!r}: a sweep "
                         f"across releases rebuilds the dev cluster per release; run it "
                         f"with --devcluster STATE_DIR"])
    problems = switch.problems(spec.releases, prepare=not dry_run)
    if problems:
        raise SpecError([f"{where}: devcluster.release: {p}" for p in problems])


class ReleaseSwitchError(RuntimeError):
    """The dev cluster could not be brought to a release."""


def switch_release(target: CephTarget, release: str) -> tuple[CephTarget, bool]:
    """Bring the dev cluster to `release` (same shape): (the new target, whether it was
    rebuilt: False when it ran that release already)."""
    switch = target.releases
    if switch is None:
        raise ReleaseSwitchError(f"release {release}: no dev cluster to rebuild")
    try:
        return switch.switch(release)
    except Exception as exc:  # the dev cluster's own error, named with the release
        raise ReleaseSwitchError(f"release {release}: the dev cluster could not be brought "
                                 f"to it: {exc}") from exc
