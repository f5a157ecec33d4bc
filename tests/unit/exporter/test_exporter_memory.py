"""No reference cycle keeps a scrape's replies alive: with the cyclic GC off (as good as
``tune_gc_for_scrapes`` between its rare passes) nothing of a finished scrape survives."""

from __future__ import annotations

import gc
import time

from cephscope.exporter.asok import RawResponse
from cephscope.exporter.collector import DaemonSession
from cephscope.exporter.collectors import enabled_collectors
from cephscope.exporter.main import settings_from_args
from cephscope.exporter.scrape import Scraper
from tests.unit.fake_asok import FakeCluster, exporter_args, only_collectors


def test_finished_scrapes_leave_no_replies_or_sessions_behind(one_osd: FakeCluster) -> None:
    one_osd.add_osd(1, fault="garbage")  # errors memoised and raised: the cycle that leaked
    args = exporter_args(one_osd.dir, *only_collectors("perf", "histogram", "ops", "opqueue"))
    scraper = Scraper(enabled_collectors(args), settings_from_args(args))
    gc.collect()
    # Other tests' late scrape threads may still hold their own replies: count only ours.
    replies_before = sum(isinstance(o, RawResponse) for o in gc.get_objects())
    gc.disable()
    try:
        for _ in range(3):
            families = scraper.scrape(time.monotonic() + 10)
            assert families
        del families
        ours = str(one_osd.dir)
        sessions = [o for o in gc.get_objects()
                    if isinstance(o, DaemonSession) and o.daemon.asok_path.startswith(ours)]
        assert sessions == []
        assert sum(isinstance(o, RawResponse) for o in gc.get_objects()) <= replies_before
    finally:
        gc.enable()
        scraper.close()
