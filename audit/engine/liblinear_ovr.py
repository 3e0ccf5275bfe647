"""LogisticRegression as the published benchmarks ran it with the liblinear solver on three or
more classes: one-vs-rest.

Up to scikit-learn 1.7, ``LogisticRegression(solver='liblinear')`` fitted one binary problem
per class (liblinear has no multinomial loss) and ``predict_proba`` normalised the per-class
sigmoids; zhan2021 names this model (``LR(liblinear, multi_class='ovr')``) and libact 0.1.6's
era used it by default. scikit-learn 1.8 removed ``multi_class`` and now refuses liblinear on
three classes, advising ``OneVsRestClassifier``. :class:`OvRLogisticRegression` follows that
advice inside a ``LogisticRegression``, so every caller (libact's wrapper, ALiPy's EER, the
runner) still sees ``coef_`` of shape (classes, features) and LogisticRegression's methods.
Binary problems and other solvers take scikit-learn's own ``fit`` and ``predict_proba``
unchanged. Each class's problem is solved by its own liblinear call with the same seed,
where the old liblinear call solved them in one run of its random generator: coefficients
can differ within liblinear's stopping tolerance.
"""
from __future__ import annotations

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.multiclass import OneVsRestClassifier


class OvRLogisticRegression(LogisticRegression):
    """``LogisticRegression`` that fits liblinear one-vs-rest on three or more classes (see the module)."""

    def _one_vs_rest(self) -> bool:
        return self.solver == "liblinear" and getattr(self, "classes_", np.empty(0)).size > 2

    def fit(self, X, y, sample_weight=None):
        if self.solver != "liblinear" or np.unique(y).size <= 2:
            return super().fit(X, y, sample_weight=sample_weight)
        if sample_weight is not None:
            raise ValueError("liblinear one-vs-rest here takes no sample_weight")
        ovr = OneVsRestClassifier(LogisticRegression(**self.get_params())).fit(X, y)
        self.classes_ = ovr.classes_
        self.coef_ = np.vstack([e.coef_ for e in ovr.estimators_])
        self.intercept_ = np.concatenate([np.atleast_1d(e.intercept_) for e in ovr.estimators_])  # 0.0 without an intercept
        self.n_iter_ = np.concatenate([e.n_iter_ for e in ovr.estimators_])
        self.n_features_in_ = ovr.estimators_[0].n_features_in_
        if hasattr(ovr.estimators_[0], "feature_names_in_"):
            self.feature_names_in_ = ovr.estimators_[0].feature_names_in_
        return self

    def predict_proba(self, X):
        """One-vs-rest: each class's sigmoid, normalised over the classes (scikit-learn <= 1.7's "ovr")."""
        if self._one_vs_rest():
            return self._predict_proba_lr(X)
        return super().predict_proba(X)

    def predict_log_proba(self, X):
        return np.log(self.predict_proba(X))
