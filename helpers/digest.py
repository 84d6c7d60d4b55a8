"""Cache keys from the code: a digest of every ``helpers`` module a result runs, found by following imports.

A cached result (:func:`helpers.data.cache.cached_json`) is keyed by the model, the data, the settings and
``code_digest(f)``, where ``f`` is the function (or module) that computes it: a digest of the module defining
``f`` and of every ``helpers`` module that module imports, directly or through others, function-local imports
included (its *import closure*, :func:`import_closure`). An edit to any of that code recomputes the result;
an edit anywhere else, or to prose (docstrings and comments are left out of the digest), recomputes nothing.
There is no list of modules and no version constant to keep by hand.

The import graph is read from the source files (nothing is imported) and is the one
``tests/unit/test_layers.py`` checks the package's layers on. It is read once per process, and so is each
module's digest: a key costs nothing per call.

>>> from helpers.digest import code_digest, import_closure
>>> from helpers.surface.run import surface_statistics
>>> len(code_digest(surface_statistics))
16
>>> "helpers.core.encoding" in import_closure("helpers.surface.run")
True
"""
from __future__ import annotations

import ast
import hashlib
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Callable

PACKAGE = Path(__file__).resolve().parent  # the ``helpers`` folder this module belongs to


def module_name(path: Path, package: Path = PACKAGE) -> str:
    """``helpers/surface/run.py`` -> ``"helpers.surface.run"`` (a package's ``__init__.py``: the package)."""
    parts = Path(path).relative_to(Path(package).parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_exports(package: Path = PACKAGE) -> dict[str, str]:
    """The package's public names (``helpers.EXPORTS``: name -> the module that defines it), read from the
    source of its ``__init__.py`` (``{}`` when it has none)."""
    tree = ast.parse((Path(package) / "__init__.py").read_text())
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and target.id == "EXPORTS" and node.value is not None:
            return dict(ast.literal_eval(node.value))
    return {}


def imports_of(path: Path, package: Path, modules: set[str], exports: dict[str, str]) -> set[str]:
    """Every module of the package that the file ``path`` imports: absolute or relative, at any depth of the
    code (an import inside a function counts); ``from helpers import X`` counts as the module that defines
    ``X`` (``exports``), ``from helpers.a import b`` as ``helpers.a.b`` when that is a module (``modules``)."""
    root = Path(package).name
    name = module_name(path, package)
    pkg = name if Path(path).name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(Path(path).read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == root)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != root:
                continue
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                if candidate in modules:
                    out.add(candidate)
                elif target == root and alias.name in exports:
                    out.add(exports[alias.name])
                else:
                    out.add(target)
    return {m for m in out if m != name}


def import_graph(package: Path = PACKAGE, exports: dict[str, str] | None = None) -> dict[str, set[str]]:
    """``{module: the package's modules it imports}`` over every ``.py`` file under ``package``; public names
    resolved with ``exports`` (default: the package's own, :func:`package_exports`)."""
    if exports is None:
        return {m: set(targets) for m, targets in _graph(Path(package).resolve()).items()}
    return _build_graph(Path(package), exports)


def _build_graph(package: Path, exports: dict[str, str]) -> dict[str, set[str]]:
    files = sorted(package.rglob("*.py"))
    modules = {module_name(p, package) for p in files}
    return {module_name(p, package): imports_of(p, package, modules, exports) for p in files}


@lru_cache(maxsize=None)
def _graph(package: Path) -> dict[str, frozenset[str]]:
    return {m: frozenset(t) for m, t in _build_graph(package, package_exports(package)).items()}


def _name(target: ModuleType | Callable | str) -> str:
    """The dotted module name of a module, a function or class (the module defining it) or a name."""
    if isinstance(target, str):
        return target
    if isinstance(target, ModuleType):
        return target.__name__
    module = getattr(target, "__module__", None)
    if not isinstance(module, str):
        raise TypeError(f"{target!r}: give a module, a function or class, or a dotted module name")
    return module


def import_closure(target: ModuleType | Callable | str) -> frozenset[str]:
    """The module of ``target`` (a module, a function or class, or a dotted name) and every module of the
    package it imports, directly or through others. Raises ``ValueError`` for a module outside the package."""
    return _closure(_name(target))


@lru_cache(maxsize=None)
def _closure(name: str) -> frozenset[str]:
    graph = _graph(PACKAGE)
    if name not in graph:
        raise ValueError(f"{name}: not a module of {PACKAGE} (a cache key follows the package's own code; "
                         f"give the function or module that computes the result)")
    seen, todo = {name}, [name]
    while todo:
        for t in graph[todo.pop()]:
            if t in graph and t not in seen:
                seen.add(t)
                todo.append(t)
    return frozenset(seen)


class _Prose(ast.NodeTransformer):
    """Drops every statement that is a bare string (docstrings of modules, classes and functions, and any
    other string left as a statement): it runs no code."""

    def visit_Expr(self, node: ast.Expr):
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return None
        return self.generic_visit(node)


def code_text(path: Path) -> str:
    """The code of the Python file ``path`` without its prose: the dump of its syntax tree with every
    docstring removed (comments are not in the tree, line numbers are not dumped)."""
    return ast.dump(_Prose().visit(ast.parse(Path(path).read_text(), str(path))))


@lru_cache(maxsize=None)
def _module_digest(name: str) -> bytes:
    folder = PACKAGE.joinpath(*name.split(".")[1:])
    path = folder / "__init__.py" if folder.is_dir() else folder.with_suffix(".py")
    return hashlib.sha256(code_text(path).encode()).digest()


@lru_cache(maxsize=None)
def _closure_digest(name: str) -> str:
    h = hashlib.sha256()
    for module in sorted(_closure(name)):
        h.update(module.encode() + b"\0" + _module_digest(module))
    return h.hexdigest()[:16]


def code_digest(target: ModuleType | Callable | str) -> str:
    """16 hex digits of SHA-256 over the code (:func:`code_text`) of every module in the import closure of
    ``target`` (:func:`import_closure`): the code part of the cache key of what ``target`` computes. Give the
    one function or module that computes the result, never a list: the closure finds the rest."""
    return _closure_digest(_name(target))
