"""`deploy/install.sh` on a Debian 12 that has nothing: a fresh minbase container (podman) runs
it on the project's tracked files, then every program the project and its tests run must
resolve there (`cephscope.host_commands`), and the same check must fail once a package is gone."""

from __future__ import annotations

from cephscope.deploy.fresh_install import REMOVED_PACKAGE, run_check


def test_install_sh_on_a_fresh_debian_installs_every_command() -> None:
    result = run_check()
    assert result.install_returncode == 0, result.install_output[-3000:]
    assert "install: ok" in result.install_output
    assert result.check_returncode == 0, result.check_output
    assert "found on PATH" in result.check_output
    # The check can fail: with one package taken away it names it and exits non-zero.
    assert result.removed_returncode == 1, result.removed_output
    assert f"missing Debian packages: {REMOVED_PACKAGE} (commands sshd)" in result.removed_output
    print(f"\nfresh install: install.sh {result.install_seconds:.0f} s; {result.check_output.strip()}")
