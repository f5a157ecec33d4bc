"""The gateway's access record (rgw.json): written for its owner only, read back whole, and a
missing or damaged file named clearly."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

import pytest

from cephscope.deploy.cluster_layout import DevClusterError
from cephscope.deploy.rgw_access import RgwAccess

ACCESS = RgwAccess("http://10.0.0.1:21099", "AK", "SK", "http://10.0.0.1:21099/auth/1.0",
                   "cephscope:swift", "SWK")


def test_saved_for_its_owner_only_and_read_back_whole(tmp_path: Path) -> None:
    old_umask = os.umask(0)  # a permissive umask must not widen the file
    try:
        ACCESS.save(tmp_path / "rgw.json")
    finally:
        os.umask(old_umask)
    assert (tmp_path / "rgw.json").stat().st_mode & 0o777 == 0o600
    assert RgwAccess.load(tmp_path / "rgw.json") == ACCESS
    assert [p.name for p in tmp_path.iterdir()] == ["rgw.json"]
    assert "SK" not in repr(ACCESS) and "SWK" not in repr(ACCESS) and "10.0.0.1" in repr(ACCESS)


@pytest.mark.parametrize(("content", "problem"), [
    (None, "is missing: the gateway's user was never made"),
    ("{not json", "is damaged"),
    ("[1, 2]", r"is damaged \(not a JSON object\)"),
    (json.dumps({**asdict(ACCESS), "secret_key": "", "swift_key": 7}),
     r"is damaged \(no secret_key, swift_key\)"),
])
def test_a_missing_or_damaged_record_is_named(tmp_path: Path, content: str | None, problem: str) -> None:
    path = tmp_path / "rgw.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(DevClusterError, match=problem):
        RgwAccess.load(path)
