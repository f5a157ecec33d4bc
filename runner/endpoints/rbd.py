"""RBD images of a step's endpoints: made with the `rbd` CLI on this machine (as CBT makes them
from its head node), one per endpoint and client, and removed after the step."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from cephscope.runner.benchmarks.base import BenchContext, BenchmarkError
from cephscope.runner.benchmarks.toolproc import resolve_tool, run_quick

RBD_SECONDS = 300.0
# a watch of a client that went away without closing the image lasts this long
WATCH_TIMEOUT_SECONDS = 35.0


@dataclass
class RbdImages:
    """Images in `pool` (data in `data_pool` when given): `size_mib` each, objects of
    2^`order` bytes, `disabled_features` turned off after creation."""

    ctx: BenchContext
    pool: str
    size_mib: int
    order: int = 22
    data_pool: str | None = None
    disabled_features: Sequence[str] = ()
    created: list[str] = field(default_factory=list)

    def _rbd(self, *args: str) -> list[str]:
        return [resolve_tool("rbd"), *self.ctx.cluster.common_args(), *args]

    def _run(self, argv: list[str], what: str) -> str | None:
        """None when it worked, else rbd's own words."""
        done = run_quick(argv, min(self.ctx.timeout_seconds, RBD_SECONDS), what, self.ctx.env)
        return None if done.returncode == 0 else done.stderr.strip()[-500:]

    def create_argv(self, image: str) -> list[str]:
        data_pool = ["--data-pool", self.data_pool] if self.data_pool else []
        return self._rbd("create", "--size", f"{self.size_mib}M", "--object-size",
                         str(1 << self.order), *data_pool, f"{self.pool}/{image}")

    def remove_leftover(self, spec: str) -> None:
        """A leftover of an interrupted attempt of this same step removed: its last client
        (a FUSE daemon just unmounted, a killed fio) may still watch it for a moment, and a
        crashed one until its watch times out (30 s)."""
        deadline = time.monotonic() + WATCH_TIMEOUT_SECONDS
        while True:
            problem = self._run(self._rbd("rm", "--no-progress", spec), "rbd rm")
            if problem is None or "has watchers" not in problem:
                return
            if time.monotonic() > deadline:
                raise BenchmarkError(f"{spec} is left from an interrupted attempt and still "
                                     f"open elsewhere: {problem}")
            time.sleep(1.0)

    def create(self, image: str) -> None:
        spec = f"{self.pool}/{image}"
        self.remove_leftover(spec)
        self.created.append(image)
        problem = self._run(self.create_argv(image), "rbd create")
        if problem is not None:
            raise BenchmarkError(f"rbd create {spec} failed: {problem}")
        if self.disabled_features:
            problem = self._run(self._rbd("feature", "disable", spec, *self.disabled_features),
                                "rbd feature disable")
            if problem is not None:
                raise BenchmarkError(f"rbd feature disable {spec} "
                                     f"{' '.join(self.disabled_features)} failed: {problem}")

    def remove_all(self) -> list[str]:
        problems = []
        for image in list(self.created):
            spec = f"{self.pool}/{image}"
            problem = self._run(self._rbd("rm", "--no-progress", spec), "rbd rm")
            if problem is None or "No such file" in problem:
                self.created.remove(image)
            else:
                problems.append(f"rbd rm {spec}: {problem}")
        return problems
