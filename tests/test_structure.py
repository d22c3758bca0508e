"""The house's structure, checked by parsing the source (no imports needed):

- layers: units -> specs -> ops -> estimate -> measure -> report/cli/web; a module never
  imports a higher layer (the package's `__init__` facade excepted);
- torch (and transformers) only in measure/ and ops/tracer.py;
- no private (`_name`) function or constant imported from another module;
- no function of the core (specs, ops, estimate, measure) over 100 lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "src" / "gpuplan"
RANK = {"units": 0, "errors": 0, "specs": 1, "catalog": 1, "ops": 2, "estimate": 3,
        "measure": 4, "report": 5, "cli": 6, "web": 6}
CORE = ("specs", "ops", "estimate", "measure")
TORCH = ("torch", "transformers")
SOURCES = sorted(p for p in ROOT.rglob("*.py"))


def _layer(path: Path) -> str:
    return path.relative_to(ROOT).parts[0].removesuffix(".py")


def _imports(tree: ast.AST) -> list[tuple[str, list[str], int]]:
    """(module, imported names, line) of every import, module level or inside functions."""
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
            out.append((n.module, [a.name for a in n.names], n.lineno))
        elif isinstance(n, ast.Import):
            out.extend((a.name, [], n.lineno) for a in n.names)
    return out


def test_the_source_tree_is_found():
    assert len(SOURCES) > 40 and all(_layer(p) in RANK or p.name == "__init__.py"
                                     for p in SOURCES)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_follow_the_layers(path: Path):
    if path == ROOT / "__init__.py":
        return  # the facade (gpuplan.trace) imports lazily from ops.tracer
    here = RANK[_layer(path)]
    tree = ast.parse(path.read_text())
    for module, names, line in _imports(tree):
        parts = module.split(".")
        if parts[0] == "gpuplan" and len(parts) > 1:
            assert RANK[parts[1]] <= here, f"{path.name}:{line} imports {module} (a higher layer)"
            private = [n for n in names if n.startswith("_")]
            assert not private, f"{path.name}:{line} imports private {private} from {module}"
        if parts[0] in TORCH:
            rel = path.relative_to(ROOT).as_posix()
            assert rel.startswith("measure/") or rel == "ops/tracer.py", \
                f"{rel}:{line} imports {module}: torch belongs in measure/ or ops/tracer.py"


@pytest.mark.parametrize("path", [p for p in SOURCES if _layer(p) in CORE],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_core_functions_are_at_most_100_lines(path: Path):
    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (n.end_lineno or n.lineno) - n.lineno + 1
            assert length <= 100, f"{path.name}: {n.name} is {length} lines"


def test_the_checks_catch_a_violation(tmp_path: Path):
    """The parser sees imports inside functions and private names."""
    tree = ast.parse("def f():\n    from gpuplan.cli.main import _x\n    import torch\n")
    assert ("gpuplan.cli.main", ["_x"], 2) in _imports(tree)
    assert ("torch", [], 3) in _imports(tree)
