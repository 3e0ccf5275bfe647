"""Replays libact 0.1.6's own VarianceReduction on a pool; run by tests/test_variance_reduction.py.

A standalone script for a Python whose libact has the VarianceReduction C extension (it
imports only numpy and libact, not al-audit): ``python libact_vr_reference.py in.npz``
reads X, y (-1 = unlabeled, labels 0..K-1), y_true, rounds, sigma, n_jobs, C and
random_state, queries ``rounds`` times (revealing each pick's true label, binary labels
given to libact as -1/+1 as al-audit's libact adapter gives them) and prints the picks
as JSON.
"""
import contextlib
import io
import json
import os
import sys

import numpy as np


def main(path):
    data = np.load(path)
    X, y, y_true = data["X"], data["y"].copy(), data["y_true"]
    with contextlib.redirect_stdout(io.StringIO()):
        from libact.base.dataset import Dataset
        from libact.models import LogisticRegression
        from libact.query_strategies.variance_reduction import VarianceReduction
    binary = y_true.max() <= 1
    to_libact = (lambda v: -1 if v == 0 else 1) if binary else int
    dataset = Dataset(X, [to_libact(v) if v != -1 else None for v in y])
    model = LogisticRegression(C=float(data["C"]), random_state=int(data["random_state"]))
    strategy = VarianceReduction(dataset, model=model, sigma=float(data["sigma"]), optimality="trace",
                                 n_jobs=int(data["n_jobs"]))
    picks = []
    saved = os.dup(1)
    try:
        os.dup2(2, 1)  # the C code prints "SVD failed to converge" lines on stdout
        for _ in range(int(data["rounds"])):
            row = int(strategy.make_query())
            picks.append(row)
            dataset.update(row, to_libact(y_true[row]))
    finally:
        os.dup2(saved, 1)
    print(json.dumps(picks))


if __name__ == "__main__":
    main(sys.argv[1])
