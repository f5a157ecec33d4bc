"""The table of programs cephscope runs: complete against the source, installed by install.sh,
and what the preflights name when one is missing."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cephscope import host_commands
from tests.unit.cli_runs import cephscope, one_error_line

REPO = Path(__file__).resolve().parents[2]
SOURCE_DIRS = ("cephscope", "exporter", "runner", "deploy", "dashboards", "benchmarks", "tests")
# A word that can only be a program: no spaces, no '=' or '{', not an option.
PROGRAM = re.compile(r"^(/[a-z]+)*/?[a-z][a-z0-9_+.-]*$")
# Calls whose first argument is an argv (or, for the lookups, a program name).
ARGV_CALLS = frozenset({"run", "Popen", "check_output", "check_call", "call", "popen", "run_quick",
                        "_run", "_run_here", "run_here", "admin_command", "_text", "argv", "host_command",
                        "release_command", "ArgvRestart", "run_tool"})
LOOKUP_CALLS = frozenset({"which", "_tool", "resolve_tool", "run_tool"})
# Words in argv position that are not programs this machine runs: a restart method's name
# (`ArgvRestart(name, argv)`), and the user's own command placeholder.
NOT_PROGRAMS = frozenset({"systemd", "cephadm", "command"})


def _callee(node: ast.Call) -> str | None:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def _program_of(arg: ast.expr, callee: str) -> str | None:
    if isinstance(arg, ast.List | ast.Tuple) and arg.elts:
        first = arg.elts[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value
        if isinstance(first, ast.Call) and _callee(first) in LOOKUP_CALLS and first.args:
            return _program_of(first.args[0], "which")
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and callee in LOOKUP_CALLS:
        return arg.value
    return None


def programs_in_source() -> dict[str, list[str]]:
    """Every literal program the source runs or looks up, with where."""
    found: dict[str, list[str]] = {}
    for top in SOURCE_DIRS:
        for path in sorted((REPO / top).rglob("*.py")):
            if "fixtures" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not isinstance(node, ast.Call) or not node.args:
                    continue
                callee = _callee(node)
                if callee not in ARGV_CALLS | LOOKUP_CALLS:
                    continue
                program = _program_of(node.args[0], callee)
                if program and PROGRAM.match(program) and program not in NOT_PROGRAMS:
                    found.setdefault(Path(program).name, []).append(
                        f"{path.relative_to(REPO)}:{node.lineno}")
    return found


def install_sh_packages() -> set[str]:
    text = (REPO / "deploy" / "install.sh").read_text()
    block = re.search(r"^debian_packages=\((.*?)^\)", text, re.S | re.M)
    assert block, "deploy/install.sh has no debian_packages=( … ) list"
    words = re.sub(r"#[^\n]*", "", block.group(1)).split()
    return set(words)


def test_every_program_the_source_runs_is_in_the_table() -> None:
    found = programs_in_source()
    # The scan must see the code at all: these are run through argv lists in three parts.
    assert {"ceph-authtool", "ip", "ssh-keygen", "losetup", "tee", "promtool"} <= set(found)
    unknown = {name: where[:3] for name, where in found.items() if name not in host_commands.BY_NAME}
    assert not unknown, f"programs run by the source but not in cephscope.host_commands: {unknown}"


def test_install_sh_installs_every_package_of_the_table() -> None:
    named = install_sh_packages()
    needed = {c.package for c in host_commands.COMMANDS if c.package}
    assert not needed - named, f"deploy/install.sh does not install {sorted(needed - named)}"


def test_table_names_each_program_once() -> None:
    names = [c.name for c in host_commands.COMMANDS]
    assert len(names) == len(set(names))
    with pytest.raises(host_commands.UnknownCommandError, match="not-a-program"):
        host_commands.command("not-a-program")


def test_missing_names_the_package_of_each_absent_program() -> None:
    present = {"ceph", "rados"}
    absent = host_commands.missing(["ceph", "rados", "sshd", "ssh-keygen", "go"],
                                   which=lambda n: f"/usr/bin/{n}" if n in present else None)
    assert [c.name for c in absent] == ["sshd", "ssh-keygen", "go"]
    message = host_commands.missing_packages_message(absent)
    assert message == ("missing Debian packages: openssh-client openssh-server "
                       "(commands sshd, ssh-keygen); missing from PATH: go")


def _path_without(tmp_path: Path, left_out: set[str]) -> str:
    """A PATH dir with a link to every program of the table found here, but `left_out`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    for c in host_commands.COMMANDS:
        real = shutil.which(c.name)
        if real and c.name not in left_out:
            (bin_dir / c.name).symlink_to(real)
    return str(bin_dir)


def test_check_exits_non_zero_naming_the_package(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": _path_without(tmp_path, {"sshd", "podman"})}
    proc = subprocess.run([sys.executable, "-m", "cephscope.host_commands", "--check"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 1
    assert "missing Debian packages: openssh-server podman (commands sshd, podman)" in proc.stderr
    env["PATH"] = _path_without(tmp_path / "all", set())
    whole = subprocess.run([sys.executable, "-m", "cephscope.host_commands", "--check"],
                           capture_output=True, text=True, timeout=60, env=env)
    assert whole.returncode == 0, whole.stderr


def test_multi_host_dev_cluster_names_openssh_server_before_it_builds_anything(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": _path_without(tmp_path, {"sshd"})}
    state = tmp_path / "c"
    line = one_error_line(cephscope("devcluster", "up", "--state-dir", str(state), "--hosts", "3",
                                    "--clients", "2", env=env))
    assert "missing Debian packages: openssh-server (commands sshd)" in line
    assert "make setup" in line
    assert not state.exists()
