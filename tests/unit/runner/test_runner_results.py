"""The run dir's journal (runner/results.py): typed, written atomically, read back by
`--resume` and the restore; a state.json it cannot trust is refused naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cephscope.runner.results import JOURNAL_FILE, ResultsError, RunDir, RunJournal


def run_dir(tmp_path: Path) -> RunDir:
    spec = tmp_path / "s.yaml"
    spec.write_text("benchmarks: {}\n")
    return RunDir.create(tmp_path / "run", "run", spec, spec.read_text(), {}, [])


def test_an_empty_journal_before_the_first_change(tmp_path: Path) -> None:
    rd = run_dir(tmp_path)
    assert rd.journal() == RunJournal()
    assert not (rd.path / JOURNAL_FILE).exists()


def test_record_keeps_the_other_entries_and_writes_the_file_read_back(tmp_path: Path) -> None:
    rd = run_dir(tmp_path)
    rd.record(created_pools=["cephscope-bench"], created_erasure_profiles=["ec42"])
    rd.record(restarting_osds=[2, 0], scrub_flags_set=["noscrub"])
    journal = RunDir(rd.path).journal()
    assert journal.created_pools == ["cephscope-bench"]
    assert journal.restarting_osds == [2, 0] and journal.scrub_flags_set == ["noscrub"]
    assert not journal.idle_baseline_taken
    data = json.loads((rd.path / JOURNAL_FILE).read_text())
    assert "idle_baseline" not in data and "idle_baseline_taken" not in data
    # an idle baseline skipped (None) is taken all the same: a resumed run does not redo it
    rd.record(idle_baseline=None)
    assert RunDir(rd.path).journal().idle_baseline_taken
    assert json.loads((rd.path / JOURNAL_FILE).read_text())["idle_baseline"] is None
    with pytest.raises(TypeError):
        rd.record(created_pool=["typo"])


def test_a_journal_written_before_it_was_typed_is_read(tmp_path: Path) -> None:
    """The run dirs of earlier versions kept the same keys (some absent): read as they are."""
    rd = run_dir(tmp_path)
    (rd.path / JOURNAL_FILE).write_text(json.dumps({
        "created_pools": ["p"], "created_erasure_profiles": [], "scrub_flags_set": ["noscrub"],
        "restarting_osds": [1], "idle_baseline": {"start": 1.0, "end": 31.0}}))
    journal = rd.journal()
    assert journal.created_pools == ["p"] and journal.restarting_osds == [1]
    assert journal.idle_baseline == {"start": 1.0, "end": 31.0} and journal.idle_baseline_taken
    assert journal.recovery_osds == [] and journal.unrestored == [] and journal.release is None


@pytest.mark.parametrize(("content", "message"), [
    ('{"created_pools": "p"}', "created_pools: 'p': wrong type"),
    ('{"restarting_osds": ["1"]}', "restarting_osds: ['1']: wrong type"),
    ('{"pools": []}', "pools: unknown key"),
    ('[1, 2]', "not a run journal"),
    ('{"created_pools": [', "cannot read the run journal"),
])
def test_a_journal_it_cannot_trust_is_refused_naming_the_file(tmp_path: Path, content: str,
                                                              message: str) -> None:
    rd = run_dir(tmp_path)
    (rd.path / JOURNAL_FILE).write_text(content)
    with pytest.raises(ResultsError) as caught:
        rd.journal()
    assert str(caught.value).startswith(str(rd.path / JOURNAL_FILE)) and message in str(caught.value)
