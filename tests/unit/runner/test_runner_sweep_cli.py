"""The runner's options, declared once (runner/sweep_cli.FLAGS): each flag fills the option it
names, and the flags' defaults are the options' own."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from cephscope.runner.annotations import TOKEN_ENV
from cephscope.runner.crashpoints import CRASH_ENV
from cephscope.runner.options import SweepOptions
from cephscope.runner.sweep_cli import FLAGS, add_arguments, options_from_args


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_every_flag_fills_an_option_that_exists() -> None:
    nested = {"hygiene": SweepOptions().hygiene, "ssh": SweepOptions().ssh,
              "rgw": SweepOptions().rgw}
    for f in FLAGS:
        if f.to is None:
            continue
        section, _, name = f.to.rpartition(".")
        owner = nested[section] if section else SweepOptions()
        assert name in {x.name for x in dataclasses.fields(owner)}, f.names


def test_the_flags_defaults_are_the_options_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    monkeypatch.delenv(CRASH_ENV, raising=False)
    assert options_from_args(parse("s.yaml")) == SweepOptions(spec_path=Path("s.yaml"))


def test_flags_land_in_their_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, "from-env")
    opts = options_from_args(parse(
        "--resume", "r", "--parallel", "--clients", "a,,b", "--ssh-option", "A=b",
        "--no-drop-caches", "--health-allow", "X", "--metrics-linger", "2",
        "--cluster-timeout", "9", "--no-ssh-multiplex"))
    assert opts.resume_dir == Path("r") and opts.spec_path is None
    assert opts.rolling is False and opts.clients == ("a", "b")
    assert opts.ssh.options == ("A=b",) and opts.ssh.multiplex is False
    assert opts.hygiene.drop_caches is False and opts.hygiene.health_allow == ("X",)
    assert opts.metrics_linger_seconds == 2.0 and opts.cluster_timeout_seconds == 9.0
    assert opts.grafana_token == "from-env"  # the flag's fallback
    rgw = options_from_args(parse("--rgw-endpoint", "http://gw:8080", "--rgw-keys-file", "k.json",
                                  "--rgw-swift-user", "u:swift")).rgw
    assert (rgw.endpoint, rgw.keys_file, rgw.swift_user) == ("http://gw:8080", Path("k.json"),
                                                             "u:swift")
    assert options_from_args(parse("--grafana-token", "t")).grafana_token == "t"
