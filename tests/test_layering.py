"""Layering, enforced (issue 17, item 8): the modules of audit/ and adapters/ import one
another without a cycle, and only adapters/ imports an active-learning library.

The import graph is read from the source with ``ast``: every import statement, those
inside functions included, and ``importlib.import_module`` of a literal name.
"""
from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("audit", "adapters")
AL_LIBRARIES = frozenset({"libact", "alipy", "skactiveml", "modAL", "alpbench", "baal", "small_text"})
# PyTorch is a model library, not an AL one: CDALBench's classifiers are model specs
# (audit/engine/models.py), so one engine module builds them, and no other module imports it.
TORCH_MODULES = {"audit.engine.torch_models"}


def modules(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    """{dotted module name: file} of every module of ``packages`` under ``root``."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported_names(module: str, path: Path) -> set[str]:
    """Every absolute module name the file imports (``from a import b`` names ``a`` and ``a.b``)."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, one level up per extra dot
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            names |= {base} | {f"{base}.{alias.name}" for alias in node.names}
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            names.add(node.args[0].value)
    return names


def import_graph(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    """{module: the project's modules it imports}. A module's own parent packages are not
    edges: Python imports them before the module whatever it says."""
    own = modules(root, packages)
    return {m: {n for n in imported_names(m, p) if n in own and n != m and not m.startswith(n + ".")}
            for m, p in own.items()}


def import_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph (its first module repeated at the end), or None."""
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        return exc.args[1]
    return None


def al_library_imports(root: Path, packages: tuple[str, ...] = PACKAGES) -> list[tuple[str, str]]:
    """(module, library) for each AL library a module outside adapters/ imports."""
    return sorted({(m, name.split(".")[0]) for m, p in modules(root, packages).items()
                   if m.split(".")[0] != "adapters"
                   for name in imported_names(m, p) if name.split(".")[0] in AL_LIBRARIES})


def test_audit_and_adapters_have_no_import_cycle():
    cycle = import_cycle(import_graph(REPO))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_only_adapters_import_an_active_learning_library():
    assert al_library_imports(REPO) == []


def test_only_the_model_module_imports_pytorch():
    importers = {m for m, p in modules(REPO).items() for name in imported_names(m, p) if name.split(".")[0] == "torch"}
    assert importers == TORCH_MODULES


def test_the_graph_holds_the_layers_it_checks():
    """Not vacuous: the runner reaches the libraries only through the adapter registry."""
    graph = import_graph(REPO)
    assert "adapters" in graph["audit.engine.runner"] and "adapters.oracles" not in graph["audit.engine.runner"]
    assert "audit.engine.runner" not in graph["adapters.oracles"]
    assert len(graph) > 30


def write_package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.mark.parametrize("b_text", [
    "from audit.a import f\n",
    "def g():\n    import audit.a\n",  # inside a function
    "from . import a\n",  # relative
    "import importlib\n\ndef g():\n    return importlib.import_module('audit.a')\n",
])
def test_the_checker_finds_a_cycle(tmp_path, b_text):
    root = write_package(tmp_path, {"audit/__init__.py": "", "audit/a.py": "from audit.b import g\n\ndef f(): pass\n",
                                    "audit/b.py": b_text, "audit/c.py": "import audit.a\n", "adapters/__init__.py": ""})
    cycle = import_cycle(import_graph(root))
    assert cycle is not None and set(cycle) == {"audit.a", "audit.b"} and cycle[0] == cycle[-1]


def test_the_checker_passes_a_package_without_a_cycle(tmp_path):
    root = write_package(tmp_path, {"audit/__init__.py": "", "audit/a.py": "from audit.b import g\n",
                                    "audit/sub/__init__.py": "from .. import b\n", "audit/b.py": "import audit\n",
                                    "adapters/__init__.py": "import audit.a\n"})
    graph = import_graph(root)
    assert graph["audit.sub"] == {"audit.b"} and graph["adapters"] == {"audit.a"}
    assert import_cycle(graph) is None


def test_the_checker_finds_an_al_library_outside_adapters(tmp_path):
    root = write_package(tmp_path, {
        "audit/__init__.py": "", "audit/deep.py": "import baal.bayesian as bb\n",
        "audit/engine/benchmark.py": "import numpy\n\ndef f():\n    from skactiveml.pool import UncertaintySampling\n",
        "adapters/__init__.py": "", "adapters/libact.py": "import libact\n"})
    assert al_library_imports(root) == [("audit.deep", "baal"), ("audit.engine.benchmark", "skactiveml")]
