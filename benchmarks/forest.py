"""LeanForest against scikit-learn's RandomForestClassifier (run by hand, not in CI).

    cd /work/main && uv run python benchmarks/forest.py [--repeats 5]

For labeled sets of the sizes an active-learning trial walks through, fits 100 trees
(random_state 6211, lu2023's) both ways, predicts the test rows' probabilities, checks
the two give identical probabilities, and prints the fastest of ``--repeats`` runs of
each and their ratio. The runs alternate, so drift in the machine's speed hits both.
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
from sklearn.ensemble import RandomForestClassifier  # noqa: E402

from audit.engine.datasets import load_dataset  # noqa: E402
from audit.fast.forest import LeanForest  # noqa: E402
from audit.fast.policy import fast_path_verified  # noqa: E402

CASES = (("checkerboard", (20, 200, 500, 940)), ("sonar", (20, 60, 124)), ("banana", (200, 1600, 3180)))


def timed(model_class, X, y, X_test) -> tuple[float, np.ndarray]:
    start = time.perf_counter()
    proba = model_class(n_estimators=100, random_state=6211).fit(X, y).predict_proba(X_test)
    return time.perf_counter() - start, proba


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    assert fast_path_verified(LeanForest), "the lean path failed its self-check here: every fit would be scikit-learn's"
    print(f"100 trees, fit + predict_proba on the rest; fastest of {args.repeats}; "
          f"{platform.machine()}, Python {platform.python_version()}")
    print("| data set | labeled rows | test rows | RandomForestClassifier s | LeanForest s | ratio |")
    print("|---|---|---|---|---|---|")
    for name, sizes in CASES:
        data = load_dataset(name)
        rows = np.random.default_rng(0).permutation(data.y.size)
        for n in sizes:
            labeled, rest = rows[:n], rows[n:]
            best = {RandomForestClassifier: np.inf, LeanForest: np.inf}
            probas = {}
            for _ in range(args.repeats):
                for model_class in best:
                    seconds, probas[model_class] = timed(model_class, data.X[labeled], data.y[labeled],
                                                         data.X[rest])
                    best[model_class] = min(best[model_class], seconds)
            if not np.array_equal(probas[RandomForestClassifier], probas[LeanForest]):
                sys.exit(f"{name}, {n} rows: probabilities differ")
            sk, lean = best[RandomForestClassifier], best[LeanForest]
            print(f"| {name} | {n} | {rest.size} | {sk:.4f} | {lean:.4f} | {sk / lean:.1f}x |", flush=True)
    print("probabilities identical in every case")


if __name__ == "__main__":
    main()
