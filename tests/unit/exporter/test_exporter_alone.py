"""The exporter installs and runs alone: a fresh venv with the core dependencies only.

The project's wheel goes into a venv made from scratch (no system site-packages, no pip of
its own), with the core dependencies (and the build backend) taken from the wheels deploy/install.sh keeps in
``.venv/wheelhouse`` (no network). An extra that crept into the core fails the install
(``--no-index``); an import of the runner, dev cluster or dashboards fails the import check.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.fake_asok import FakeCluster

REPO = Path(__file__).resolve().parents[3]
WHEELHOUSE = Path(sys.prefix) / "wheelhouse"
# What the exporter's package is built from; the rest of the tree is not needed for a wheel.
SOURCES = ("pyproject.toml", "README.md", "cephscope", "exporter", "runner", "deploy",
           "dashboards")
FORBIDDEN = ("cephscope.runner", "cephscope.deploy", "cephscope.dashboards", "cephscope.cli")


@pytest.fixture(scope="module")
def exporter_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not WHEELHOUSE.is_dir():
        pytest.fail(f"{WHEELHOUSE} missing: deploy/install.sh writes it (make setup)")
    work = tmp_path_factory.mktemp("alone")
    src = work / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=ignore)
        else:
            shutil.copy2(path, src / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-index", "--find-links", str(WHEELHOUSE),
                    "-w", str(work / "dist"), str(src)], check=True, timeout=120)
    (wheel,) = (work / "dist").glob("cephscope-*.whl")
    venv = work / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=60)
    subprocess.run([*pip, "--python", str(venv / "bin" / "python"), "install", "--no-index",
                    "--find-links", str(WHEELHOUSE), str(wheel)], check=True, timeout=120)
    return venv


def test_core_dependencies_are_the_exporters_only() -> None:
    with (REPO / "pyproject.toml").open("rb") as f:
        project = tomllib.load(f)["project"]
    core = {re.split(r"[<>=!~ ]", dep, maxsplit=1)[0].lower() for dep in project["dependencies"]}
    assert core == {"pyyaml", "bcrypt"}
    extras = project["optional-dependencies"]
    assert {"runner", "dashboards", "dev"} <= set(extras)
    assert "cephscope[runner,dashboards]" in extras["dev"]
    everything = " ".join([*project["dependencies"], *(d for ds in extras.values() for d in ds)]).lower()
    assert "pyudev" not in everything  # the exporter reads /run/udev/data itself


def test_docker_image_copies_only_the_exporter() -> None:
    copies = [line.split()[1:-1] for line in (REPO / "Dockerfile").read_text().splitlines()
              if line.startswith("COPY ")]
    # the exporter, and the mon client it shares with the runner and dev cluster
    assert copies == [["pyproject.toml"], ["cephscope/__init__.py", "cephscope/monclient.py"],
                      ["exporter"]]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[FakeCluster]:
    fake = FakeCluster(tmp_path / "run")
    fake.add_osd(0)
    fake.add_osd(1)
    yield fake
    fake.stop()


def test_exporter_runs_alone_in_a_fresh_venv(exporter_venv: Path, cluster: FakeCluster) -> None:
    exe = exporter_venv / "bin" / "cephscope-exporter"
    version = subprocess.run([str(exe), "--version"], capture_output=True, text=True,
                             timeout=30, check=True)
    assert version.stdout.startswith("cephscope-exporter ")

    port = free_port()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPROFILEIMPORTTIME": "1"}
    proc = subprocess.Popen(
        [str(exe), f"--web.listen-address=127.0.0.1:{port}", f"--ceph.asok-dir={cluster.dir}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    try:
        body = ""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                    body = r.read().decode()
                break
            except OSError:
                if proc.poll() is not None:
                    break
                time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            _, stderr = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, stderr = proc.communicate()
    assert body, f"no scrape from the exporter; its stderr:\n{stderr[-3000:]}"
    assert 'cephscope_daemon_up{ceph_daemon="osd.1"} 1' in body
    assert 'ceph_osd_op_w{ceph_daemon="osd.0"}' in body
    for collector in ("perf", "histogram", "opqueue", "ops"):
        assert f'cephscope_scrape_collector_success{{collector="{collector}"}} 1' in body

    imported = set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", stderr, re.M))
    assert "cephscope.exporter.scrape" in imported  # the import log is complete
    loaded = sorted(m for m in imported if m.startswith(FORBIDDEN))
    assert not loaded, f"the exporter imported {loaded}"
    assert not {"prometheus_client", "requests", "rich", "matplotlib"} & imported
