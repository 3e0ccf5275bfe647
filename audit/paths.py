"""Where the project's own files are, defined once: the checkout's root (reports and
stores may never replace it), its reference tables and the shared directory beside it."""
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
REFERENCE_DIR = PROJECT_ROOT / "reference_results"
SHARED_DATA_DIR = PROJECT_ROOT.parent / "shared" / "datasets"
