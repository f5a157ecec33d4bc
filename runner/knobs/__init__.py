"""Knobs: every kind of setting a sweep can turn, one small class per kind (see `base`)."""
