"""al-audit: replay published active-learning protocols and audit the numbers.

The Python API (``audit.reproduce``, ``audit.trials``, ``audit.rounds``, ``audit.protocol``,
``audit.references``, ``audit.compare``, ``audit.summary``) lives in audit/api.py and is loaded on first use,
so ``import audit`` stays instant and imports neither pandas nor scikit-learn.
"""

from audit.errors import AuditError
from audit.version import __version__

API = ("Replay", "reproduce", "trials", "rounds", "protocol", "references", "compare", "summary")
__all__ = ["AuditError", "__version__", *API]


def __getattr__(name: str):
    if name in API:
        from audit import api

        return getattr(api, name)
    raise AttributeError(f"module 'audit' has no attribute {name!r}")
