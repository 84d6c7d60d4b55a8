"""Cache keys from the code: a digest of every ``helpers`` module a result runs, found by following imports.

A cached result (:func:`helpers.data.cache.cached_json`) is keyed by the model, the data, the settings and
``code_digest(f)``, where ``f`` is the function (or module) that computes it: a digest of the module defining
``f`` and of every ``helpers`` module that module imports, directly or through others, function-local imports
included (its *import closure*, :func:`import_closure`). An edit to any of that code recomputes the result;
an edit anywhere else, or to prose (docstrings and comments are left out of the digest), recomputes nothing.
There is no list of modules and no version constant to keep by hand.

The import graph is read from the source files (nothing is imported) and is the one
``tests/unit/test_layers.py`` checks the package's layers on. It is read once per process, and so is each
module's digest: a key costs nothing per call. Reading means parsing every module (about 1.5 s of processor time,
in every process that makes a key: each page of the book, each command); what a file's parse gives (its imports
and its code's digest) is kept by the file's content in the cache folder (:class:`ParseMemo`), so a process after
the first parses only the files that changed.

>>> from helpers.digest import code_digest, import_closure
>>> from helpers.surface.run import surface_statistics
>>> len(code_digest(surface_statistics))
16
>>> "helpers.core.encoding" in import_closure("helpers.surface.run")
True
"""
from __future__ import annotations

import ast
import contextlib
import hashlib
import importlib.util
import json
import os
import sys
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


def import_statements(tree: ast.AST) -> list[list]:
    """Every import in ``tree``, at any depth of the code, as ``[level, module, names]``: ``level`` ``None`` for
    ``import a.b, c`` (``module`` ``None``), else ``from`` with its level of dots (0: absolute)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.append([None, None, [a.name for a in node.names]])
        elif isinstance(node, ast.ImportFrom):
            out.append([node.level, node.module, [a.name for a in node.names]])
    return out


def imports_of(path: Path, package: Path, modules: set[str], exports: dict[str, str],
               statements: list[list] | None = None) -> set[str]:
    """Every module of the package that the file ``path`` imports: absolute or relative, at any depth of the
    code (an import inside a function counts); ``from helpers import X`` counts as the module that defines
    ``X`` (``exports``), ``from helpers.a import b`` as ``helpers.a.b`` when that is a module (``modules``).
    ``statements``: the file's :func:`import_statements`, when already read."""
    root = Path(package).name
    name = module_name(path, package)
    pkg = name if Path(path).name == "__init__.py" else name.rpartition(".")[0]
    if statements is None:
        statements = import_statements(ast.parse(Path(path).read_text(), str(path)))
    out = set()
    for level, module, names in statements:
        if level is None:
            out.update(a for a in names if a.split(".")[0] == root)
        else:
            if level:
                base = pkg.split(".")[: len(pkg.split(".")) - level + 1]
                target = ".".join(base + ([module] if module else []))
            else:
                target = module or ""
            if target.split(".")[0] != root:
                continue
            for alias in names:
                candidate = f"{target}.{alias}"
                if candidate in modules:
                    out.add(candidate)
                elif target == root and alias in exports:
                    out.add(exports[alias])
                else:
                    out.add(target)
    return {m for m in out if m != name}


def import_graph(package: Path = PACKAGE, exports: dict[str, str] | None = None) -> dict[str, set[str]]:
    """``{module: the package's modules it imports}`` over every ``.py`` file under ``package``; public names
    resolved with ``exports`` (default: the package's own, :func:`package_exports`)."""
    if exports is None:
        return {m: set(targets) for m, targets in _graph(Path(package).resolve()).items()}
    return _build_graph(Path(package), exports)


def _build_graph(package: Path, exports: dict[str, str], memo: ParseMemo | None = None) -> dict[str, set[str]]:
    files = sorted(package.rglob("*.py"))
    modules = {module_name(p, package) for p in files}
    read = (lambda p: None) if memo is None else (lambda p: memo.facts(p)["imports"])
    return {module_name(p, package): imports_of(p, package, modules, exports, read(p)) for p in files}


@lru_cache(maxsize=None)
def _graph(package: Path) -> dict[str, frozenset[str]]:
    memo = _memo()
    graph = {m: frozenset(t) for m, t in _build_graph(package, package_exports(package), memo).items()}
    memo.save()
    return graph


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


def code_text(path: Path, tree: ast.AST | None = None) -> str:
    """The code of the Python file ``path`` without its prose: the dump of its syntax tree with every
    docstring removed (comments are not in the tree, line numbers are not dumped). ``tree``: the file's
    parsed tree, when already read (changed in place)."""
    return ast.dump(_Prose().visit(ast.parse(Path(path).read_text(), str(path)) if tree is None else tree))


class ParseMemo:
    """What parsing each file of the package gives, kept by the file's content: its :func:`import_statements`
    and the SHA-256 of its :func:`code_text` (``{"imports": ..., "code": hex}``), in one JSON file in the cache
    folder ``folder`` (``code/digest-memo.TAG.json``, named for the interpreter, whose bytecode magic number it
    records: a syntax tree's dump differs between Python versions). The file carries a checksum of its entries: a
    damaged or unreadable file counts as empty, and a folder that cannot be written leaves each process parsing for
    itself, as without the memo. The digests are the same with and without it."""

    VERSION = 1
    PYTHON = importlib.util.MAGIC_NUMBER.hex()  # the interpreter's bytecode magic: its syntax trees may differ
    KEEP = 2000  # entries kept: every file of a few checkouts and their edits sharing one cache

    def __init__(self, folder: Path):
        self.path = Path(folder) / "code" / f"digest-memo.{sys.implementation.cache_tag}.json"
        self.entries = self._load()
        self.used: set[str] = set()
        self.changed = False

    def _load(self) -> dict[str, dict]:
        with contextlib.suppress(OSError, ValueError, TypeError, KeyError, AttributeError):
            kept = json.loads(self.path.read_text(encoding="utf-8"))
            entries = kept["entries"]
            if (kept["version"], kept["python"]) == (self.VERSION, self.PYTHON) and kept["sha256"] == self._checksum(entries):
                return entries
        return {}

    @staticmethod
    def _checksum(entries: dict) -> str:
        return hashlib.sha256(json.dumps(entries, sort_keys=True).encode()).hexdigest()

    def facts(self, path: Path) -> dict:
        """``{"imports": import_statements, "code": SHA-256 of code_text}`` of the file ``path``, parsed only when its
        content is not in the memo."""
        key = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        entry = self.entries.get(key)
        if entry is None:
            tree = ast.parse(Path(path).read_text(), str(path))
            imports = import_statements(tree)  # before code_text, which removes the docstrings from the tree
            entry = {"imports": imports, "code": hashlib.sha256(code_text(path, tree).encode()).hexdigest()}
            self.entries[key] = entry
            self.changed = True
        self.used.add(key)
        return entry

    def save(self) -> None:
        """Write the memo when a file was parsed (the entries this process used, then the others from the most
        recently used, as the file lists them, up to :attr:`KEEP`), atomically (a temporary file renamed into place)
        with the permissions of the umask, as every file of the cache; nothing when the folder cannot be written."""
        if not self.changed:
            return
        others = [k for k in self.entries if k not in self.used]
        keep = [k for k in self.entries if k in self.used] + others[: max(0, self.KEEP - len(self.used))]
        entries = {k: self.entries[k] for k in keep}
        text = json.dumps({"version": self.VERSION, "python": self.PYTHON, "sha256": self._checksum(entries),
                           "entries": entries})
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "w", encoding="utf-8") as out:
                    out.write(text)
                os.replace(tmp, self.path)
            except OSError:
                tmp.unlink(missing_ok=True)
                raise
        self.changed = False


@lru_cache(maxsize=None)
def _memo() -> ParseMemo:
    """The memo of this process, in the cache folder in force when the first key is made."""
    from helpers.context import cache_folder

    return ParseMemo(cache_folder())


@lru_cache(maxsize=None)
def _module_digest(name: str) -> bytes:
    folder = PACKAGE.joinpath(*name.split(".")[1:])
    path = folder / "__init__.py" if folder.is_dir() else folder.with_suffix(".py")
    memo = _memo()
    digest = bytes.fromhex(memo.facts(path)["code"])
    memo.save()
    return digest


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
