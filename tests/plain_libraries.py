"""The libraries as shipped, every speed-up of this tool switched off (tests, benchmarks)."""
from __future__ import annotations

import contextlib
from unittest import mock

import numpy as np
from sklearn.svm import SVC

from adapters import alipy
from audit.engine.liblinear_ovr import OvRLogisticRegression
from audit.engine.models import BUILDERS


def _plain_svc(kernel: str):
    return lambda random_state, **params: SVC(kernel=kernel, random_state=random_state, **params)


def _plain_lr(random_state, **params):
    return OvRLogisticRegression(random_state=random_state, **params)  # the `lr` spec without LeanLR


def _shipped_lal(qs):
    """ALiPy's LAL object trained by ALiPy's own function, with scikit-learn's forests."""
    qs.train_selector_from_file()
    return qs


@contextlib.contextmanager
def plain_libraries():
    """scikit-learn's own SVC and LogisticRegression for the svm and lr specs, ALiPy's own
    EER log-loss loop, a fresh ``np.linalg.pinv`` on every one of BMDR's ADMM iterations, and LAL's forests as
    ALiPy builds them (scikit-learn's, not the lean ones)."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.dict(BUILDERS, {"svm-rbf": _plain_svc("rbf"),
                                                       "svm-linear": _plain_svc("linear"), "lr": _plain_lr}))
        stack.enter_context(mock.patch.object(alipy, "sequential_log_loss_verified", lambda: False))
        stack.enter_context(mock.patch.object(alipy, "_RepeatPinvNumpy", lambda: np))
        stack.enter_context(mock.patch.object(alipy, "_lean_lal", _shipped_lal))
        yield
