"""The CLI speaks to users: the top-level help says what cephscope does and how to start, and
every option of every command has help text."""

from __future__ import annotations

import argparse

import pytest

from cephscope.cli import SUBCOMMANDS, build_parser, main


def test_top_level_help_speaks_to_users(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "Benchmark a Ceph cluster" in out and "typical use:" in out
    assert "cephscope sweep" in out and "cephscope report" in out and "make demo" in out
    for name in SUBCOMMANDS:
        assert name in out
    assert "sub-command per part" not in out  # no developer notes


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser(name)
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return actions[0].choices[name]


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_every_flag_has_help(name: str) -> None:
    def walk(parser: argparse.ArgumentParser, prefix: str) -> list[str]:
        missing = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    missing += walk(sub, f"{prefix} {sub_name}")
                continue
            if isinstance(action, argparse._HelpAction):
                continue
            if not (action.help and action.help.strip()) and action.help != argparse.SUPPRESS:
                missing.append(f"{prefix} {'/'.join(action.option_strings) or action.dest}")
        return missing

    assert walk(_subparser(name), f"cephscope {name}") == []
