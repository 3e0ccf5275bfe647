"""Adapters: every query strategy behind one interface (:class:`adapters.base.QueryStrategy`).

Protocols name implementations ``library.name``. Each adapter module
(``adapters/<library>.py``) lists its strategies in a module-level ``STRATEGIES`` dict;
this registry imports a module (and so its library) only on demand, so a library that is
missing or broken makes its strategies unavailable, not the tool. The reference oracles
import no AL library; they are "library" ``oracle`` (``adapters/oracles.py``).

Plug-ins: a protocol may name ``package.module:ClassName``, any importable subclass of
:class:`QueryStrategy`, and an installed package may register implementations under the
entry-point group ``al_audit.strategies`` (entry-point name: the implementation name a
protocol uses, ``owner.name``; value: ``package.module:ClassName``). A plug-in that does
not load is unavailable with the reason, like a missing library.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
from importlib import metadata
from pathlib import Path

from adapters.base import MISSING, QueryStrategy
from audit.errors import AuditError

LIBRARIES: dict[str, str] = {
    "native": "adapters.native",
    "libact": "adapters.libact",
    "alipy": "adapters.alipy",
    "skactiveml": "adapters.skactiveml",
    "alpbench": "adapters.alpbench",  # the optional extra `alpbench` (uv run --extra alpbench)
    "oracle": "adapters.oracles",
}

ENTRY_POINT_GROUP = "al_audit.strategies"

__all__ = ["ENTRY_POINT_GROUP", "LIBRARIES", "MISSING", "QueryStrategy", "implementations", "plugin_code_hash",
           "plugins", "strategy_class", "unavailable_reason", "uses_test_labels"]


def _module(library: str):
    try:
        module_name = LIBRARIES[library]
    except KeyError:
        raise AuditError(f"unknown library '{library}'; known: {', '.join(sorted(LIBRARIES))}") from None
    try:
        return importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or a library that breaks while importing
        raise AuditError(f"{library} cannot be imported here: {type(exc).__name__}: {exc}") from None


def _entry_points() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def plugins() -> list[tuple[str, str, str]]:
    """(implementation name, its class path, where it comes from) of every registered plug-in."""
    found = []
    for name, ep in sorted(_entry_points().items()):
        dist = f"{ep.dist.name} {ep.dist.version}" if ep.dist else "an installed package"
        found.append((name, ep.value, f"entry point of {dist}"))
    return found


def implementations() -> list[str]:
    """Every registered implementation name whose adapter module imports, then the plug-ins'."""
    names = []
    for library in LIBRARIES:
        try:
            names += [f"{library}.{name}" for name in _module(library).STRATEGIES]
        except AuditError:
            continue
    return names + [name for name, _, _ in plugins() if name not in names]


def _load_class(path: str, shown: str) -> type[QueryStrategy]:
    """The QueryStrategy subclass at ``package.module:ClassName``."""
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute or not all(part.isidentifier() for part in
                                                   (*module_name.split("."), *attribute.split("."))):
        raise AuditError(f"plug-in '{shown}' is not of the form package.module:ClassName")
    try:
        target = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
    except Exception as exc:  # the plug-in's own import may fail in any way
        raise AuditError(f"plug-in '{shown}' does not load: {type(exc).__name__}: {exc}") from None
    if not (isinstance(target, type) and issubclass(target, QueryStrategy)):
        raise AuditError(f"plug-in '{shown}' is not a subclass of adapters.base.QueryStrategy")
    return target


def strategy_class(implementation: str) -> type[QueryStrategy]:
    if ":" in implementation:
        return _load_class(implementation, implementation)
    library, _, name = implementation.partition(".")
    if library not in LIBRARIES:
        entry_point = _entry_points().get(implementation)
        if entry_point is not None:
            return _load_class(entry_point.value, implementation)
    strategies = _module(library).STRATEGIES if library in LIBRARIES else {}
    if name not in strategies:
        raise AuditError(
            f"unknown implementation '{implementation}'; known: {', '.join(sorted(implementations()))}"
        )
    return strategies[name]


def plugin_code_hash(implementation: str) -> str | None:
    """Hash of a plug-in's source (every .py file of its top-level package, or its module
    file), so stored trials are recomputed when the plug-in changes; None for a shipped one."""
    if ":" not in implementation and implementation.partition(".")[0] in LIBRARIES:
        return None
    module = strategy_class(implementation).__module__
    spec = importlib.util.find_spec(module.split(".")[0])
    if spec is None or spec.origin is None:
        return None
    origin = Path(spec.origin)
    files = sorted(origin.parent.rglob("*.py")) if origin.name == "__init__.py" else [origin]
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(origin.parent).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def unavailable_reason(implementation: str) -> str | None:
    """None when the implementation can run here, else why not."""
    try:
        cls = strategy_class(implementation)
    except AuditError as exc:
        return str(exc)
    return cls.availability()


def uses_test_labels(implementation: str) -> bool:
    """Does the implementation choose by the test labels (a reference oracle)? False for one
    that cannot be loaded here: it runs nothing."""
    try:
        return strategy_class(implementation).uses_test_labels
    except AuditError:
        return False
