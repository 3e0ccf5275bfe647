"""One policy for the private fast paths of scikit-learn estimators (LeanSVC, LeanForest,
LeanForestRegressor, LeanGridLR, LeanLR).

A fast estimator subclasses a scikit-learn estimator (its parent) and fits some inputs
through a faster route with bit-identical results. It takes that route only when all of
these hold, and otherwise the parent's own ``fit`` runs:

1. the installed scikit-learn is in :data:`SUPPORTED_SKLEARN`, the releases whose private
   fitting code the fast paths mirror;
2. the parameters pass the parent's own validation (``_validate_params`` against its
   ``_parameter_constraints``), run before the fast path and again whenever a parameter
   changes, so a bad parameter raises scikit-learn's own error;
3. the inputs are :func:`plain_inputs`, on which the parent's input validation
   (``validate_data``, ``check_classification_targets``) raises nothing, warns nothing and
   changes no value; any other input goes to the parent's ``fit``, which validates it, so a
   bad input (complex X, X and y of different lengths, a continuous y given to a
   classifier) raises scikit-learn's own error;
4. the estimator's self-check has compared the fast path with the parent bit for bit once
   in this process (:func:`fast_path_verified`); a mismatch warns once and sends every
   later fit to the parent.

Every fit says which route ran: the estimator's ``fast_path_`` and, for a replay, the
trial's record (:func:`recording`), which the store keeps and the report shows. A library that
picks its code by the estimator's class name gets the fitted estimator as its parent's class
(:func:`public_view`).
"""
from __future__ import annotations

import contextlib
import contextvars
import copy
import functools
import warnings
from typing import Any, Callable, Iterator

import numpy as np
import sklearn
from sklearn.utils._param_validation import validate_parameter_constraints

# scikit-learn releases (major, minor) the fast paths mirror: from the first, up to but not including the second.
SUPPORTED_SKLEARN = ((1, 9), (1, 10))
LIBRARY = "library"  # the provenance of a fit that ran the scikit-learn parent's own code


class FastPathFallbackWarning(UserWarning):
    """A fast path disagreed with its scikit-learn parent in this process: every fit is the parent's."""


def release_in(version: str, supported: tuple[tuple[int, int], tuple[int, int]]) -> bool:
    """Is ``version``'s (major, minor) in ``supported``: from the first, up to not including the second?"""
    parts = version.split(".")
    try:
        release = (int(parts[0]), int(parts[1]))
    except (IndexError, ValueError):
        return False
    return supported[0] <= release < supported[1]


def sklearn_supported(version: str | None = None) -> bool:
    """Is ``version`` (default: the installed scikit-learn's) in SUPPORTED_SKLEARN?"""
    return release_in(sklearn.__version__ if version is None else version, SUPPORTED_SKLEARN)


def plain_inputs(X: Any, y: Any, target_kinds: str = "iu") -> bool:
    """Is (X, y) an input the parent's validation accepts as it is: X a non-empty 2-D
    array of finite real numbers of at most 64 bits (a wider float may not fit float64),
    y a 1-D array of X's length whose dtype kind is in ``target_kinds`` (integers for a
    classifier; a regressor's float64 targets are ``"f"`` at 8 bytes)?"""
    return (type(X) is np.ndarray and X.ndim == 2 and X.shape[0] > 0 and X.shape[1] > 0
            and X.dtype.kind in "fiu" and X.dtype.itemsize <= 8 and type(y) is np.ndarray and y.ndim == 1
            and y.dtype.kind in target_kinds and y.dtype.itemsize <= 8
            and y.shape[0] == X.shape[0] and bool(np.isfinite(X).all()))


@functools.cache
def fast_path_verified(estimator_class: type) -> bool:
    """Does ``estimator_class``'s fast path agree with its parent here? Run once per process
    and class (its ``_agrees_with_parent``); on a supported scikit-learn a disagreement, or
    the check failing, warns once with FastPathFallbackWarning."""
    if not sklearn_supported():
        return False
    try:
        agrees = bool(estimator_class._agrees_with_parent())
    except Exception as exc:  # a private helper renamed or changed: the parent runs
        agrees, why = False, f"its self-check failed ({type(exc).__name__}: {exc})"
    else:
        why = "its self-check found a difference"
    if not agrees:
        mro = estimator_class.__mro__
        parent = mro[mro.index(FastPathMixin) + 1].__name__
        warnings.warn(f"{estimator_class.__name__}: {why} from {parent} on scikit-learn {sklearn.__version__}; "
                      f"every fit runs {parent}", FastPathFallbackWarning, stacklevel=2)
    return agrees


def route_verified(route: str, check: Callable[[], bool], fallback: str) -> bool:
    """A fast route's self-check, run by its caller once per process: True when ``check``
    finds the route bit for bit the library's; otherwise (a difference, or the check raising
    because a library internal changed) it warns once with FastPathFallbackWarning, saying
    what runs instead (``fallback``), and returns False."""
    try:
        agrees, why = bool(check()), "its self-check found a difference"
    except Exception as exc:
        agrees, why = False, f"its self-check failed ({type(exc).__name__}: {exc})"
    if not agrees:
        warnings.warn(f"{route}: {why} {fallback}", FastPathFallbackWarning, stacklevel=3)
    return agrees


@functools.lru_cache(maxsize=64)
def _seed_of_int(random_state: int) -> int:
    return int(np.random.RandomState(random_state).randint(np.iinfo("i").max))


def native_seed(random_state: Any) -> int:
    """The seed ``SVC.fit`` and ``_fit_liblinear`` draw for libsvm and liblinear:
    ``check_random_state(random_state).randint(np.iinfo("i").max)``, fixed (and cached)
    for an int; for None (numpy's global generator) or a RandomState, the same draw from it."""
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        return _seed_of_int(int(random_state))
    from sklearn.utils import check_random_state

    return check_random_state(random_state).randint(np.iinfo("i").max)


_RAN: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar("fast_paths_ran", default=None)


@contextlib.contextmanager
def recording(ran: set[str] | None = None) -> Iterator[set[str]]:
    """Collect into ``ran`` (a new set by default) the routes, fast path names or LIBRARY, of the
    fast estimators fitted inside, in this thread."""
    ran = set() if ran is None else ran
    token = _RAN.set(ran)
    try:
        yield ran
    finally:
        _RAN.reset(token)


def record_route(route: str) -> None:
    """Add ``route`` (a fast path's name or LIBRARY) to the recording trial's set, if any."""
    ran = _RAN.get()
    if ran is not None:
        ran.add(route)


def provenance(ran: set[str]) -> str:
    """A trial's flag: the routes that ran, joined by "+"; LIBRARY when no fast path ran."""
    return "+".join(sorted(ran)) or LIBRARY  # "library" sorts after every "lean-..." name


def public_class(estimator_class: type) -> type:
    """The scikit-learn class a fast estimator class stands in for (the first of its bases
    defined in scikit-learn, e.g. RandomForestClassifier for LeanForest)."""
    return next(c for c in estimator_class.__mro__ if c.__module__.startswith("sklearn."))


def public_view(model: Any) -> Any:
    """``model`` as an instance of its scikit-learn class: a shallow copy with the same fitted
    attributes whose class is :func:`public_class`; any other model as it is.

    For a library that picks its code by the estimator's class name (ALPBench's ensembles read
    a ``sklearn.ensemble._forest.RandomForestClassifier``'s trees one by one and refit any other
    learner once per member): the view is the scikit-learn class, so its methods are the
    parent's, run on the fitted attributes the fast path left, which the fast estimators'
    self-checks compare with the parent's own fit bit for bit. Refitting the view changes only
    the view."""
    if not isinstance(model, FastPathMixin):
        return model
    view = copy.copy(model)
    view.__class__ = public_class(type(model))
    return view


_SCALARS = frozenset({str, int, float, bool, type(None)})
_VALIDATED: set[tuple] = set()  # (class, typed parameter values) that passed the parent's validation here


def validate_params_once(estimator_class: type, params: dict[str, Any]) -> None:
    """``estimator_class``'s scikit-learn parameter validation of ``params`` (its
    ``_parameter_constraints``, errors naming the scikit-learn class it stands in for), skipped
    when the same values passed for this class before in this process.

    A replay builds a fresh estimator with the same parameters every round; validation is a
    function of the class and the values, so parameters that are all plain scalars (str, int,
    float, bool, None), each keyed with its exact type (1, 1.0 and True are different keys),
    are validated once."""
    values = tuple(params.get(name) for name in estimator_class._parameter_constraints)
    key = None
    if all(type(v) in _SCALARS for v in values):
        key = (estimator_class, tuple((type(v), v) for v in values))
        if key in _VALIDATED:
            return
    validate_parameter_constraints(estimator_class._parameter_constraints, params,
                                   caller_name=public_class(estimator_class).__name__)
    if key is not None and len(_VALIDATED) < 4096:
        _VALIDATED.add(key)


class FastPathMixin:
    """The fit of a fast estimator (``class Fast(FastPathMixin, Parent)``); a subclass names its
    route in ``fast_path_name`` and provides ``_fast_options`` (the parameters and inputs its
    fast path reproduces, beyond plain_inputs), ``_fast_fit`` and ``_agrees_with_parent``."""

    fast_path_name: str
    _target_kinds = "iu"  # the dtype kinds of a plain target (plain_inputs): class labels

    def _validate_params(self) -> None:
        """scikit-learn's parameter check, naming the scikit-learn estimator the user asked for
        (``LogisticRegression``), not the private fast class that stands in for it."""
        validate_parameter_constraints(self._parameter_constraints, self.get_params(deep=False),
                                       caller_name=public_class(type(self)).__name__)

    def _validate_params_once(self) -> None:
        """The parent's parameter validation, rerun only when a parameter's value changed
        (:func:`validate_params_once`, under this class and the scikit-learn estimator's name)."""
        values = tuple(getattr(self, name) for name in self._parameter_constraints)
        if self.__dict__.get("_validated_params") == values:
            return
        validate_params_once(type(self), dict(zip(self._parameter_constraints, values)))
        self._validated_params = values

    def _fast_path_verified(self) -> bool:
        return fast_path_verified(type(self))

    def _record_path(self, fast: bool) -> None:
        """Say which route this fit took: ``fast_path_`` and the recording trial's set."""
        self.fast_path_ = self.fast_path_name if fast else LIBRARY
        record_route(self.fast_path_)

    def fit(self, X, y, sample_weight=None):
        fast = plain_inputs(X, y, self._target_kinds) and self._fast_options(X, y, sample_weight)
        if fast:
            self._validate_params_once()
            fast = self._fast_path_verified()
        if fast:
            self._fast_fit(X, y)
        else:
            super().fit(X, y, sample_weight=sample_weight)
        self._record_path(fast)
        return self
