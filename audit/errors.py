"""User-facing errors: each carries one line the CLI prints before exiting non-zero."""


class AuditError(Exception):
    """A problem with the user's input or environment, reported without a traceback."""


class StrategyError(AuditError):
    """A query strategy broke its contract or failed inside its library during one trial."""
