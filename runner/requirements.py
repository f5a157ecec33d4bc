"""What a spec's benchmarks need from where they run, checked before anything changes: each
tool a benchmark runs is on every client (hsbench and getput are not in Debian and cannot be
installed here; swift-bench comes with the runner extra), and a gateway benchmark has the
endpoint and keys of the API it drives. A run missing either is refused, naming the tool and
where it comes from, or what the endpoint lacks and where to give it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from cephscope.host_commands import which_here
from cephscope.runner.axes import axes_product
from cephscope.runner.benchmarks.base import Benchmark
from cephscope.runner.hostexec import HostExec, HostExecError
from cephscope.runner.rgw_endpoint import RgwEndpoint
from cephscope.runner.spec import Spec

CHECK_TIMEOUT_SECONDS = 30.0
# `python3 -c ON_PATH COMMAND` on a client: exit 0 when COMMAND resolves there
ON_PATH = "import shutil, sys; sys.exit(0 if shutil.which(sys.argv[1]) else 1)"
WHERE_KEYS = ("--devcluster with a dev cluster up with --rgw, the spec's rgw section (or CBT's "
              "places for them), --rgw-endpoint/--rgw-swift-auth-url/--rgw-swift-user/"
              "--rgw-keys-file, or $CEPHSCOPE_RGW_ACCESS_KEY/_SECRET_KEY/_SWIFT_KEY")


def tools_needed(spec: Spec, benchmarks: Mapping[str, type[Benchmark]]
                 ) -> dict[tuple[str, str], list[str]]:
    """(command, where it comes from) -> the benchmarks that run it."""
    needed: dict[tuple[str, str], list[str]] = {}
    for name, params in spec.benchmarks.items():
        for combo in axes_product(params):
            for tool in benchmarks[name].tools(combo):
                users = needed.setdefault(tuple(tool), [])
                if name not in users:
                    users.append(name)
    return needed


def endpoint_problems(spec: Spec, benchmarks: Mapping[str, type[Benchmark]],
                      rgw: RgwEndpoint) -> list[str]:
    problems = []
    for name in spec.benchmarks:
        cls = benchmarks[name]
        found = cls.endpoint_problems(rgw)
        if cls.rgw_api and rgw.missing(cls.rgw_api):
            found = [f"{p} (give them with {WHERE_KEYS})" for p in found]
        problems += found
    return problems


def missing_tools(spec: Spec, benchmarks: Mapping[str, type[Benchmark]],
                  clients: Sequence[HostExec],
                  which: Callable[[str], str | None] = which_here) -> list[str]:
    """One line per tool not found where the benchmarks run (every client, else here)."""
    problems = []
    for (command, origin), users in tools_needed(spec, benchmarks).items():
        where = ", ".join(users)
        if not clients:
            if which(command) is None:
                problems.append(f"{where}: tool {command!r} not found on PATH here; it comes "
                                f"from {origin}")
            continue
        for client in clients:
            try:
                done = client.run(["python3", "-c", ON_PATH, command],
                                  timeout=CHECK_TIMEOUT_SECONDS, check=False)
            except HostExecError as exc:
                problems.append(f"{where}: cannot look for {command!r} on {client.name}: {exc}")
                continue
            if done.returncode != 0:
                problems.append(f"{where}: tool {command!r} not found on PATH on {client.name}; "
                                f"it comes from {origin}")
    return problems


def problems(spec: Spec, benchmarks: Mapping[str, type[Benchmark]], rgw: RgwEndpoint,
             clients: Sequence[HostExec]) -> list[str]:
    return endpoint_problems(spec, benchmarks, rgw) + missing_tools(spec, benchmarks, clients)
