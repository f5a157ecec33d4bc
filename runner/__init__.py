"""Sweep runner: CBT-style parametric sweeps with phase tagging."""
