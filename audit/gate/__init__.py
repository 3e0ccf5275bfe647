"""CI gating: suites, baselines, per-cell verdicts against a baseline, and JUnit output."""
