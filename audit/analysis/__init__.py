"""Analyses of stored trials: comparison with published numbers, statistics, compatibility grids, cross-checks, diagnosis."""
