"""Cache keys from the code: a digest of the source of the modules that compute a result.

A cached result (:func:`helpers.data.cache.cached_json`) is keyed by the model, the data and the
settings; adding ``source_digest(...)`` of the modules that define the computation makes any change to
their code recompute it, with no version constant to remember to bump. A change that leaves the numbers
alike (a docstring) recomputes once, which costs time, never correctness.

>>> from helpers.digest import source_digest
>>> key = {"model": "...", "code": source_digest("helpers.norms.stats", "helpers.core.norm_maps")}
>>> len(key["code"])
16
"""
from __future__ import annotations

import hashlib
import importlib
from pathlib import Path
from types import ModuleType


def source_digest(*modules: ModuleType | str) -> str:
    """16 hex digits of SHA-256 over the source files of ``modules`` (module objects or dotted names), each
    with its name, in the order given. Raises ``ValueError`` for a module without a Python source file."""
    if not modules:
        raise ValueError("source_digest() needs at least one module")
    h = hashlib.sha256()
    for module in modules:
        module = importlib.import_module(module) if isinstance(module, str) else module
        path = getattr(module, "__file__", None)
        if not path or not path.endswith(".py"):
            raise ValueError(f"{module.__name__}: no Python source file to digest ({path})")
        h.update(module.__name__.encode() + b"\0" + Path(path).read_bytes() + b"\0")
    return h.hexdigest()[:16]
