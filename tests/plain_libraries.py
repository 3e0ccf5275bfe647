"""The libraries as shipped, every speed-up of this tool switched off (tests, benchmarks)."""
from __future__ import annotations

import contextlib
from unittest import mock

import numpy as np
from sklearn.svm import SVC

from adapters import alipy
from audit.engine.models import BUILDERS


def _plain_svc(kernel: str):
    return lambda random_state, **params: SVC(kernel=kernel, random_state=random_state, **params)


@contextlib.contextmanager
def plain_libraries():
    """scikit-learn's own SVC for the svm specs, ALiPy's own EER log-loss loop and a
    fresh ``np.linalg.pinv`` on every one of BMDR's ADMM iterations."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.dict(BUILDERS, {"svm-rbf": _plain_svc("rbf"),
                                                       "svm-linear": _plain_svc("linear")}))
        stack.enter_context(mock.patch.object(alipy, "sequential_log_loss_verified", lambda: False))
        stack.enter_context(mock.patch.object(alipy, "_RepeatPinvNumpy", lambda: np))
        yield
