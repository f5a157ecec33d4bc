"""Why the exporter renders the text format itself: the same families both ways.

    .venv/bin/python benchmarks/render_cost.py [--osds 60] [--rounds 20]

One scrape of N fake OSDs (tests/unit/fake_asok.py replaying the ``load`` captures, all
collectors that read admin sockets) gives the exporter's families. They are rendered
``--rounds`` times by the exporter's renderer (``cephscope.exporter.exposition.render``) and
by prometheus_client (``generate_latest`` of a registry whose collector yields the same
families as prometheus_client ``Metric`` objects, built once, outside the timing). Both
outputs are parsed back and must hold the same samples. Printed: samples, median and best
milliseconds per render each way, and the ratio. Figures, not a test; needs the ``runner``
extra (prometheus_client).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from cephscope.exporter.collectors import enabled_collectors
from cephscope.exporter.exposition import render
from cephscope.exporter.main import build_parser, settings_from_args
from cephscope.exporter.scrape import Scraper

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scrape_cost import start_fakes  # sibling script, not a package

ASOK_COLLECTORS = ("perf", "histogram", "opqueue", "ops")


class Replay(Collector):
    """Yields prebuilt prometheus_client families (what a custom collector would build)."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


def samples_of(text: str) -> set[tuple[str, tuple[tuple[str, str], ...], float]]:
    return {(s.name, tuple(sorted(s.labels.items())), s.value)
            for family in text_string_to_metric_families(text) for s in family.samples}


def timed(render_once: object, rounds: int) -> list[float]:
    times = []
    for _ in range(rounds):
        gc.collect()
        start = time.perf_counter()
        render_once()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--osds", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=20)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        child = start_fakes(Path(tmp), opts.osds)
        try:
            flags = ["--collector.disable-defaults", *(f"--collector.{c}" for c in ASOK_COLLECTORS)]
            args = build_parser().parse_args(["--ceph.asok-dir", tmp, *flags])
            scraper = Scraper(enabled_collectors(args), settings_from_args(args))
            try:
                families = list(scraper.scrape(time.monotonic() + 60))
            finally:
                scraper.close()
        finally:
            child.terminate()
            child.wait(timeout=30)

    ours = render(families)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Replay(list(text_string_to_metric_families(ours.decode()))))
    theirs = generate_latest(registry)
    if samples_of(ours.decode()) != samples_of(theirs.decode()):
        print("the two renderings hold different samples", file=sys.stderr)
        return 1

    own = timed(lambda: render(families), opts.rounds)
    client = timed(lambda: generate_latest(registry), opts.rounds)
    n = len(samples_of(ours.decode()))
    names = len({family.name for family in families})
    print(f"{opts.osds} OSDs, {names} metric families, {n} samples, {len(ours)} bytes; "
          f"{opts.rounds} renders each")
    for name, times in (("exporter render()", own), ("prometheus_client generate_latest", client)):
        print(f"  {name:36s} median {statistics.median(times) * 1e3:7.1f} ms   "
              f"best {min(times) * 1e3:7.1f} ms")
    print(f"  ratio prometheus_client / exporter (median): "
          f"{statistics.median(client) / statistics.median(own):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
