"""al-audit: replay published active-learning protocols and audit the numbers."""

__version__ = "0.1.0"
