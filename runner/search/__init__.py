"""Sweeps that search: adaptive repetition, successive halving, a model-based sampler (Optuna
ask-and-tell), Pareto fronts, a recommendation with its confidence, and a replay mode that
measures the search itself against a stored full grid (see docs/runner.md)."""
