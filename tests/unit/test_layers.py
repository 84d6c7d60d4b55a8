"""The package's architecture: imports point one way only, from higher layers to lower ones, and no
module imports the CLI. Every ``import`` counts, including those inside functions (a lazy import is
still a dependency), so a cycle cannot hide behind one.

Layers, lowest first (a module may import its own layer and those below):

0. settings and the paper: ``config``, ``paper``, ``claims`` (the claim record and verdict rules)
1. ``core``: model in, maps out
2. ``data``: every read and write (CoNLL-U, corpora, segments, OntoGUM, the cache, atomic files)
3. ``pipeline``: steps the sections share (extraction into the cache, the distributed engine, options)
4. one package per paper section: ``surface``, ``syntax``, ``coref``, ``probe``, ``cluster``, ``norms``
5. ``results`` (every section's claims for one model) and ``compare`` (several models)
6. ``presentation``: views, charts, glue, summary tables
7. ``cli``, ``__main__`` and the package's public names (``helpers/__init__.py``)
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "helpers"
LAYERS = {
    "config": 0, "paper": 0, "claims": 0,
    "core": 1, "data": 2, "pipeline": 3,
    "surface": 4, "syntax": 4, "coref": 4, "probe": 4, "cluster": 4, "norms": 4,
    "results": 5, "compare": 5,
    "presentation": 6,
    "cli": 7, "__main__": 7, "__init__": 7,
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every ``helpers`` module ``path`` imports (absolute or relative, at any depth of the code)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "helpers")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "helpers":
                continue
            for alias in node.names:  # ``from helpers.surface import stats`` imports a module
                candidate = f"{target}.{alias.name}"
                out.add(candidate if candidate in MODULES else target)
    return {m for m in out if m != name}


def layer(module: str) -> int:
    parts = module.split(".")
    key = parts[1] if len(parts) > 1 else "__init__"
    if key not in LAYERS:
        raise AssertionError(f"{module}: not in any layer; add its package to LAYERS in {__file__}")
    return LAYERS[key]


FILES = sorted(PACKAGE.rglob("*.py"))
MODULES = {module_name(p) for p in FILES}
GRAPH = {module_name(p): imports_of(p) for p in FILES}


def section(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_point_down(module):
    if module == "helpers":
        return  # the public names re-export from every layer
    upward = sorted(t for t in GRAPH[module] if t != "helpers" and layer(t) > layer(module))
    assert not upward, f"{module} (layer {layer(module)}) imports higher layers: {upward}"
    assert "helpers.cli" not in GRAPH[module] or module in ("helpers.__main__",), f"{module} imports the CLI"


def test_no_module_imports_the_cli():
    importers = sorted(m for m, targets in GRAPH.items() if "helpers.cli" in targets)
    assert importers == ["helpers.__main__"], importers


def test_no_cycles():
    """Depth-first search over the whole graph (lazy imports included) finds no cycle."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(GRAPH.get(m, ())):
            if t == "helpers" or t not in GRAPH:
                continue
            if state.get(t) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(t):] + [t]))
            if t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(GRAPH):
        if m not in state and m != "helpers":
            visit(m)


def test_the_checker_sees_lazy_and_relative_imports(tmp_path):
    """The checker itself: an import inside a function and a relative one are both found."""
    pkg = tmp_path / "helpers" / "core"
    pkg.mkdir(parents=True)
    src = pkg / "thing.py"
    src.write_text("def f():\n    from helpers.presentation import views\n    from ..data import cache\n")
    global PACKAGE
    saved = PACKAGE
    try:
        PACKAGE = tmp_path / "helpers"
        found = imports_of(src)
    finally:
        PACKAGE = saved
    assert {"helpers.presentation.views", "helpers.data.cache"} <= found | {t for t in found}, found


def test_public_names_are_what_the_readme_calls():
    """``import helpers`` gives the functions (not modules) the README uses; the modules keep their paths."""
    import inspect

    import helpers
    import helpers.core.extract

    for name in ("extract", "explore", "load_model", "load_treebank", "encode_words", "attention_for"):
        assert callable(getattr(helpers, name)) and not inspect.ismodule(getattr(helpers, name)), name
    assert callable(helpers.charts.save_chart) and callable(helpers.views.load_javascript)
    assert helpers.extract is not helpers.core.extract and inspect.ismodule(helpers.core.extract)


def test_the_repository_is_found_from_every_layer():
    """Files beside the package (``.book_assets/``, ``../shared/data``) are found from one definition
    of the repository root, whatever sub-package asks (a module moved one level deeper once pointed
    its own ``parents[1]`` at ``helpers/``)."""
    from helpers import config
    from helpers.presentation import views

    assert (config.PROJECT_ROOT / "helpers" / "__init__.py").is_file()
    assert views.PROJECT_ROOT == config.PROJECT_ROOT
    if "BOOK_ASSETS_DIR" not in __import__("os").environ:
        assert views.npm_dir() == config.PROJECT_ROOT / ".book_assets" / "node_modules"
