"""Fuzz every admin-socket reply parser through the whole scrape and HTTP path.

    .venv/bin/python benchmarks/fuzz_scrape.py [--mutations 100000] [--seed 1]
        [--promtool-every 1] [--workers 2]

Two fake OSDs replay real captures (tests/unit/fake_asok.py) behind a real
cephscope-exporter HTTP server with every collector on; each round replaces one reply of
osd.0 (perf dump/schema, histogram dump/schema, dump_op_pq_state wpq and mclock, ops in
flight/blocked, historic ops, status, config show, version, ...) by a seeded mutation —
truncation, bit flips, type swaps, huge/negative/NaN/Inf numbers, deep nesting, missing keys,
valid-but-huge lists — and scrapes over HTTP with a fresh exporter state every 50 rounds
and for every schema mutation (schemas are cached per daemon life). osd.0 also answers
``counter dump``/``counter schema`` and ``config get osd_mclock_profile`` from the 20.2.4
capture, and the op queue and topology caches are off, so every parser runs every round.
Checked every round: status 200, no collector raised
an unexpected exception (a bug, not bad input), osd.1's series complete (a bad reply costs
only its own daemon's or collector's series), and the exposition passes
``promtool check metrics``. promtool sees every exposition of a new *shape* — the text
with each sample value that is a plain decimal number (``12``, ``-0.5``, ``1e-05``,
``1e+30``) replaced by a placeholder, any other value token (``NaN``, ``+Inf``, garbage) kept
as it is — since whether promtool accepts an exposition does not depend on which plain
number a sample holds (batched: 25 expositions per promtool run, each with its own name
prefix, and each checked alone when the batch fails); and in any case every
``--promtool-every``-th round (default 100;
1 = all). Printed: rounds, promtool calls, failures by kind, rounds per second. The unit
tests run a 1,000-round subset.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import logging
import multiprocessing
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from cephscope.exporter.main import build_parser, make_server  # noqa: E402
from tests.unit.fake_asok import CEPH_VERSION, FIXTURES_ROOT, FakeCluster  # noqa: E402

# The mclock variant of dump_op_pq_state comes from a newer release's capture.
MCLOCK_RELEASE = "20.2.4"
PROMTOOL_BATCH = 25  # expositions per promtool run
NEWER_REPLIES = ("counter_dump.json", "counter_schema.json", "config_get.osd_mclock_profile.json")
# Cached per daemon life by the exporter: a round mutating one starts a fresh exporter.
SCHEMA_REPLIES = ("perf_schema.json", "counter_schema.json")
HUGE = [10**30, -(10**30), 2**64, -1, float("nan"), float("inf"), float("-inf"), 1e308, 0]


def mutate_value(rng: random.Random, value: Any, depth: int = 0) -> Any:
    """One structural mutation somewhere inside a parsed JSON document."""
    if isinstance(value, dict) and value and depth < 12 and rng.random() < 0.8:
        key = rng.choice(list(value))
        out = dict(value)
        roll = rng.random()
        if roll < 0.15:
            del out[key]
        elif roll < 0.2:
            out[key + "\u00e9\"\n"] = out.pop(key)
        else:
            out[key] = mutate_value(rng, value[key], depth + 1)
        return out
    if isinstance(value, list) and value and depth < 12 and rng.random() < 0.8:
        out = list(value)
        index = rng.randrange(len(out))
        roll = rng.random()
        if roll < 0.1:
            del out[index]
        elif roll < 0.15:
            out = out * max(1, 20000 // max(len(json.dumps(out)) // 100, 1))  # valid but huge
        else:
            out[index] = mutate_value(rng, out[index], depth + 1)
        return out
    choices = [
        lambda: rng.choice(HUGE),
        lambda: str(value),
        lambda: None,
        lambda: [value],
        lambda: {"x": value},
        lambda: rng.choice([True, False]),
        lambda: "",
        lambda: nest(rng.randint(50, 3000)),
        lambda: -value if isinstance(value, int | float) else value,
    ]
    return rng.choice(choices)()


def nest(depth: int) -> Any:
    doc: Any = 1
    for _ in range(depth):
        doc = {"a": [doc]}
    return doc


def mutate(rng: random.Random, payload: bytes) -> bytes:
    roll = rng.random()
    if roll < 0.15:
        return payload[: rng.randrange(max(len(payload), 1))]
    if roll < 0.3:
        data = bytearray(payload)
        for _ in range(rng.randint(1, 8)):
            if data:
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        return bytes(data)
    try:
        doc = json.loads(payload)
    except ValueError:
        return payload[::-1]
    try:
        for _ in range(rng.randint(1, 4)):
            doc = mutate_value(rng, doc)
        return json.dumps(doc, separators=(",", ":")).encode()  # NaN/Infinity tokens included
    except (RecursionError, ValueError):
        return b"[" * 5000


class _Unexpected(logging.Handler):
    """Counts 'collector failed unexpectedly' records: a parser bug, not bad input."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self.last = ""

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and "unexpectedly" in record.getMessage():
            self.count += 1
            self.last = self.format(record)[-800:]


_PLAIN_VALUE = re.compile(rb" -?[0-9]+(?:\.[0-9]+)?(?:e[-+][0-9]+)?\n")


def exposition_shape(body: bytes) -> bytes:
    """``body`` with every plain decimal sample value replaced by ``N`` (what promtool's
    verdict depends on: names, labels, HELP/TYPE lines, order and unusual value tokens)."""
    return hashlib.blake2b(_PLAIN_VALUE.sub(b" N\n", body), digest_size=16).digest()


def run(mutations: int, seed: int, promtool_every: int, quiet: bool = False,
        first_round: int = 0) -> Counter[str]:
    """Run the rounds; return failure counts by kind (empty: all passed) plus 'rounds' and
    'promtool calls' (runs) and 'promtool checked' (expositions). Rounds before
    ``first_round`` only draw their mutation (the same random sequence, nothing served):
    a failing stretch of a long run is re-run from there in seconds."""
    promtool = shutil.which("promtool")
    assert promtool, "promtool is needed (Debian: prometheus)"
    rng = random.Random(seed)
    failures: Counter[str] = Counter()
    handler = _Unexpected()
    handler.setFormatter(logging.Formatter())
    logger = logging.getLogger("cephscope")
    logger.addHandler(handler)
    mclock = (FIXTURES_ROOT / MCLOCK_RELEASE / "load" / "osd.0" / "dump_op_pq_state.json")
    with tempfile.TemporaryDirectory(prefix="cephscope-fuzz-") as tmp:
        cluster = FakeCluster(Path(tmp))
        target = cluster.add_osd(0)
        cluster.add_osd(1)
        # osd.0 also answers the labeled-counter commands (Reef and later) and the mclock
        # profile, from the newer capture, so their parsers run every round too.
        newer = FIXTURES_ROOT / MCLOCK_RELEASE / "load" / "osd.0"
        for extra in NEWER_REPLIES:
            target.responses[extra] = (newer / extra).read_bytes()
        originals = dict(target.responses)
        # The fake's compact-JSON cache of the unmutated replies, built once, not per round.
        compact_originals = {
            name: json.dumps(json.loads(payload), separators=(",", ":")).encode()
            for name, payload in originals.items() if payload[:1] in (b"{", b"[")
        }
        sources = dict(originals)
        if mclock.is_file():
            sources["dump_op_pq_state.json#mclock"] = mclock.read_bytes()
        names = sorted(sources)
        shapes_checked: set[bytes] = set()
        pending: list[tuple[int, str, bytes]] = []  # expositions waiting for promtool
        promtool_calls = promtool_checked = 0
        server = None
        started = time.monotonic()
        try:
            for round_no in range(mutations):
                name = rng.choice(names)
                served = name.partition("#")[0]
                if round_no < first_round:
                    mutate(rng, sources[name])
                    continue
                if server is None or round_no % 50 == 0 or served in SCHEMA_REPLIES:
                    if server is not None:
                        server.shutdown()
                        server.server_close()
                        server.scraper.close()
                    server = _serve(Path(tmp))
                target.responses = dict(originals)
                if served == "config_get.osd_mclock_profile.json" and mclock.is_file():
                    # Asked for only when the queue dump is mclock's.
                    target.responses["dump_op_pq_state.json"] = mclock.read_bytes()
                target.responses[served] = mutate(rng, sources[name])
                target._compact = dict(compact_originals)
                target._compact[served] = target.responses[served]
                before = handler.count
                status, body = _scrape(server.server_address[1])
                kind = ""
                if status != 200:
                    kind = f"status {status}"
                elif handler.count != before:
                    kind = f"unexpected exception on {served}"
                elif b'cephscope_daemon_up{ceph_daemon="osd.1"} 1' not in body or (
                    b'ceph_osd_op_w{ceph_daemon="osd.1"}' not in body
                ):
                    kind = f"osd.1 series lost ({served})"
                elif _promtool_due(body, shapes_checked, promtool_every, round_no):
                    pending.append((round_no, served, body))
                    promtool_checked += 1
                if len(pending) >= PROMTOOL_BATCH or (pending and round_no == mutations - 1):
                    promtool_calls += 1
                    for bad_round, bad_served, error in promtool_batch(promtool, pending):
                        promtool_calls += 1
                        failures["promtool"] += 1
                        if not quiet and failures["promtool"] <= 3:
                            print(f"round {bad_round}: promtool ({bad_served}): {error}",
                                  file=sys.stderr)
                    pending.clear()
                if kind:
                    failures[kind.split(":")[0]] += 1
                    if not quiet and failures[kind.split(":")[0]] <= 3:
                        print(f"round {round_no}: {kind}\n{handler.last}", file=sys.stderr)
                if not quiet and round_no and round_no % 1000 == 0:
                    print(f"{round_no} rounds, {sum(failures.values())} failures, "
                          f"{round_no / (time.monotonic() - started):.0f}/s", flush=True)
        finally:
            if server is not None:
                server.shutdown()
                server.server_close()
                server.scraper.close()
            cluster.stop()
            logger.removeHandler(handler)
    failures["rounds"] = mutations - first_round
    failures["promtool calls"] = promtool_calls
    failures["promtool checked"] = promtool_checked
    return failures


def promtool_errors(promtool: str, body: bytes) -> str:
    """promtool's errors on one exposition ("" when it parses; lint warnings are not errors)."""
    check = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True,
                           timeout=120)
    # promtool exits 1 on lint warnings too; only errors count here.
    output = check.stderr + check.stdout
    if check.returncode != 0 and b"error while linting" in output:
        return repr(output[-200:])
    return ""


def batched_exposition(bodies: list[bytes]) -> bytes:
    """One exposition of several: each one's metric names get a prefix of their own
    (``b<i>_``), so families never collide and each line parses as it did alone."""
    out = []
    for i, body in enumerate(bodies):
        prefix = b"b%d_" % i
        for line in body.split(b"\n"):
            if line.startswith((b"# HELP ", b"# TYPE ")):
                out.append(line[:7] + prefix + line[7:])
            elif line and not line.startswith(b"#"):
                out.append(prefix + line)
            else:
                out.append(line)
    return b"\n".join(out)


def promtool_batch(promtool: str, pending: list[tuple[int, str, bytes]]
                   ) -> list[tuple[int, str, str]]:
    """Check ``pending`` (round, reply, exposition) with one promtool run; only if that
    finds an error (or an exposition lacks its final newline, so lines could merge) each is
    checked alone. Returns (round, reply, error) of those promtool refuses."""
    whole = all(body.endswith(b"\n") for _, _, body in pending)
    if whole and len(pending) > 1 and not promtool_errors(
            promtool, batched_exposition([body for _, _, body in pending])):
        return []
    found = []
    for round_no, served, body in pending:
        error = promtool_errors(promtool, body)
        if error:
            found.append((round_no, served, error))
    return found


def _promtool_due(body: bytes, shapes_checked: set[bytes], every: int, round_no: int) -> bool:
    """promtool on a shape not checked before, and on every ``every``-th round."""
    shape = exposition_shape(body)
    new = shape not in shapes_checked
    shapes_checked.add(shape)
    return new or (every > 0 and round_no % every == 0)


def _serve(asok_dir: Path) -> Any:
    args = build_parser().parse_args([
        "--ceph.asok-dir", str(asok_dir), "--web.listen-address", "127.0.0.1:0",
        "--ceph.asok-timeout", "5", "--no-collector.threads", "--log.level", "error",
        # Every round parses what it mutated: nothing served from a collector's cache.
        "--collector.topology.refresh-interval", "0", "--collector.opqueue.min-interval", "0",
    ])
    server = make_server(args)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _scrape(port: int) -> tuple[int, bytes]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics",
                                     headers={"X-Prometheus-Scrape-Timeout-Seconds": "20"})
    try:
        with urllib.request.urlopen(request, timeout=60) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, b""


def run_share(mutations: int, seed: int, promtool_every: int) -> Counter[str]:
    """One worker's rounds (a process of its own: the exporter under test is threaded)."""
    logging.getLogger("cephscope").setLevel(logging.ERROR)
    return run(mutations, seed, promtool_every, quiet=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutations", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--promtool-every", type=int, default=100,
                        help="promtool on every N-th round besides every new shape (1 = all)")
    parser.add_argument("--workers", type=int, default=1,
                        help="processes, each with its share of the rounds and its own seed "
                             "(seed, seed+1, ...)")
    args = parser.parse_args()
    logging.getLogger("cephscope").setLevel(logging.ERROR)
    workers = max(1, args.workers)
    shares = [args.mutations // workers + (i < args.mutations % workers) for i in range(workers)]
    seeds = [args.seed + i for i in range(workers)]
    started = time.monotonic()
    if workers == 1:
        failures = run(args.mutations, args.seed, args.promtool_every)
    else:
        failures = Counter()
        spawn = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=spawn) as pool:
            for counts in pool.map(run_share, shares, seeds, [args.promtool_every] * workers):
                failures.update(counts)
    elapsed = time.monotonic() - started
    rounds = failures.pop("rounds")
    calls = failures.pop("promtool calls")
    checked = failures.pop("promtool checked")
    seed_text = f"seed {args.seed}" if workers == 1 else (
        f"{workers} workers, seeds {seeds[0]}..{seeds[-1]}")
    print(f"{rounds} mutated replies ({seed_text}, Ceph {CEPH_VERSION} captures + "
          f"{MCLOCK_RELEASE} mclock queue), {elapsed:.0f} s ({rounds / elapsed:.0f}/s), "
          f"promtool on {checked} expositions in {calls} runs (every new shape + every "
          f"{args.promtool_every}. round), load average {os.getloadavg()[0]:.1f}")
    print(f"failures: {sum(failures.values())}" + "".join(
        f"\n  {kind}: {n}" for kind, n in failures.most_common()))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
