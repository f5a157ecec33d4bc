"""Benchmarks with one lifecycle (see `base`). `BENCHMARKS` maps CBT names to classes."""
