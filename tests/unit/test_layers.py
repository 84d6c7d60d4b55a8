"""The package's architecture: imports point one way only, from higher layers to lower ones, no module
imports the CLI, a paper section uses another section's pure statistics only, and inside a section
statistics come before the run and the run before the claims. Every ``import`` counts, including those
inside functions (a lazy import is still a dependency), so a cycle cannot hide behind one; ``from helpers
import X`` counts as an import of the module that defines ``X`` (``helpers.EXPORTS``) and a bare ``import
helpers`` as one of the top layer. Each rule has a planted violation below that makes it fail.

Layers, lowest first (a module may import its own layer and those below):

0. settings and the paper: ``config``, ``context`` (the run's settings, :class:`RunContext`), ``paper``,
   ``claims`` (the claim record and verdict rules), ``digest`` (cache keys from source code)
1. ``core``: model in, maps out
2. ``data``: every read and write (CoNLL-U, corpora, segments, OntoGUM, the cache, atomic files)
3. ``pipeline``: steps the sections share (extraction into the cache, the distributed engine, options),
   ``reduce`` (the accumulators' protocol and the one loop over shards) and ``section`` (the section record's
   type; its runs' settings include the input length of :mod:`helpers.core.encoding`)
4. one package per paper section: ``surface``, ``syntax``, ``coref``, ``probe``, ``cluster``, ``norms``,
   ``sinks`` (attention to the first position, for encoders and decoders), ``mixing`` (context-mixing maps
   scored with the paper's probes), ``ablation`` (heads and sink terms removed) and ``minimal_pairs`` (BLiMP's
   minimal pairs, with the paper's heads removed)
5. ``results`` (the sections' records, listed once, and every claim for one model), ``segment_pass`` (one pass
   over the segments for the statistics of several sections) and ``compare`` (several models)
6. ``presentation``: views, charts, glue, summary tables
7. ``cli``, ``__main__`` and the package's public names (``helpers/__init__.py``)

Inside a section the modules are ordered ``stats`` < its other helpers (``gradients``, ``mlm``) < ``run`` <
``claims`` < ``command`` < ``section`` (the section's record, which names its run, claims and command); a module
imports none later than its own rank. A section reads another's results only as declared inputs of its record,
handed in as reports: no exception to the sibling rule.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from helpers.digest import PACKAGE, import_graph, module_name, package_exports

# The import graph is the one cache keys follow (helpers.digest): one reading of the imports for both.
LAYERS = {
    "config": 0, "context": 0, "paper": 0, "claims": 0, "digest": 0,
    "core": 1, "data": 2, "pipeline": 3, "reduce": 3, "section": 3,
    "surface": 4, "syntax": 4, "coref": 4, "probe": 4, "cluster": 4, "norms": 4, "sinks": 4, "mixing": 4, "ablation": 4,
    "minimal_pairs": 4,
    "results": 5, "segment_pass": 5, "compare": 5,
    "presentation": 6, "plan": 6,
    "cli": 7, "__main__": 7, "__init__": 7,
}
SECTIONS = {name for name, level in LAYERS.items() if level == 4}
RANKS = {"stats": 0, "run": 2, "claims": 3, "command": 4, "section": 5}  # other modules of a section: 1
OTHER_RANK = 1


def layer(module: str) -> int:
    parts = module.split(".")
    key = parts[1] if len(parts) > 1 else "__init__"
    if key not in LAYERS:
        raise AssertionError(f"{module}: not in any layer; add its package to LAYERS in {__file__}")
    return LAYERS[key]


def build_graph(package: Path) -> dict[str, set[str]]:
    """The import graph of the package at ``package``, public names resolved with the real package's."""
    return import_graph(package, exports=package_exports())


FILES = sorted(PACKAGE.rglob("*.py"))
GRAPH = import_graph()  # exactly the graph cache keys follow


def section(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def rank(module: str) -> int:
    return RANKS.get(module.split(".")[-1], OTHER_RANK)


# ------------------------------------------------------------------------------------ the rules


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """``"a -> b"`` for each import of a higher layer (the public names' module may import every layer)."""
    return sorted(f"{m} -> {t}" for m, targets in graph.items() if m != "helpers"
                  for t in targets if layer(t) > layer(m))


def cli_importers(graph: dict[str, set[str]]) -> list[str]:
    return sorted(m for m, targets in graph.items() if "helpers.cli" in targets and m != "helpers.__main__")


def cycles(graph: dict[str, set[str]]) -> list[str]:
    """Depth-first search over the whole graph (lazy imports included): the first cycle found, if any."""
    state: dict[str, int] = {}
    stack: list[str] = []
    found: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(graph.get(m, ())):
            if t == "helpers" or t not in graph or found:
                continue
            if state.get(t) == 1:
                found.append(" -> ".join(stack[stack.index(t):] + [t]))
                return
            if t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state and m != "helpers" and not found:
            visit(m)
    return found


def cross_section_imports(graph: dict[str, set[str]]) -> list[str]:
    """Imports of another section's modules other than its ``stats``."""
    return sorted(f"{m} -> {t}" for m, targets in graph.items() if section(m) in SECTIONS
                  for t in targets if section(t) in SECTIONS and section(t) != section(m)
                  and t != f"helpers.{section(t)}" and t.split(".")[-1] != "stats")


def out_of_order_imports(graph: dict[str, set[str]]) -> list[str]:
    """Imports inside a section of a module later in stats < helpers < run < claims < command."""
    return sorted(f"{m} -> {t}" for m, targets in graph.items() if section(m) in SECTIONS
                  for t in targets if section(t) == section(m) and t != f"helpers.{section(m)}"
                  and m != f"helpers.{section(m)}" and rank(t) > rank(m))


# -------------------------------------------------------------------------------- the package


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_point_down(module):
    upward = upward_imports({module: GRAPH[module]})
    assert not upward, f"{module} (layer {layer(module)}) imports higher layers: {upward}"


def test_no_module_imports_the_cli():
    assert cli_importers(GRAPH) == [] and "helpers.cli" in GRAPH["helpers.__main__"]


def test_no_cycles():
    assert cycles(GRAPH) == []


def test_sections_use_only_their_siblings_stats():
    assert cross_section_imports(GRAPH) == []


def test_stats_then_run_then_claims_inside_a_section():
    assert out_of_order_imports(GRAPH) == []


# ---------------------------------------------------------------- planted violations: each rule can fail


def _package(tmp_path: Path, files: dict[str, str]) -> dict[str, set[str]]:
    """A fake ``helpers`` package under ``tmp_path`` with ``files`` (path -> source) and its import graph."""
    root = tmp_path / "helpers"
    for rel in {"__init__.py", *files}:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(root).parents:  # every folder is a package
            (root / parent / "__init__.py").touch()
        path.write_text(files.get(rel, ""))
    return build_graph(root)


def test_the_checker_sees_lazy_relative_and_public_name_imports(tmp_path):
    """An import inside a function, a relative one and ``from helpers import X`` are all found."""
    graph = _package(tmp_path, {
        "core/thing.py": "def f():\n    from helpers.presentation import views\n    from ..data import cache\n"
                         "    from helpers import explore\n",
        "presentation/views.py": "", "presentation/explore.py": "", "data/cache.py": "",
    })
    assert {"helpers.presentation.views", "helpers.data.cache", "helpers.presentation.explore"} <= graph["helpers.core.thing"]


def test_planted_upward_import_fails(tmp_path):
    graph = _package(tmp_path, {"core/thing.py": "from helpers import explore\n", "presentation/explore.py": ""})
    assert upward_imports(graph) == ["helpers.core.thing -> helpers.presentation.explore"]
    graph = _package(tmp_path / "bare", {"data/thing.py": "import helpers\n"})  # the public names: the top layer
    assert upward_imports(graph) == ["helpers.data.thing -> helpers"]


def test_planted_cli_import_fails(tmp_path):
    graph = _package(tmp_path, {"results.py": "def f():\n    import helpers.cli\n", "cli.py": ""})
    assert cli_importers(graph) == ["helpers.results"]


def test_planted_cycle_fails(tmp_path):
    graph = _package(tmp_path, {"data/a.py": "from helpers.data import b\n", "data/b.py": "def f():\n    from helpers.data import a\n"})
    assert cycles(graph) == ["helpers.data.a -> helpers.data.b -> helpers.data.a"]


@pytest.mark.parametrize("importer", ["run", "section"])
@pytest.mark.parametrize("target", ["run", "claims", "command", "gradients", "section"])
def test_planted_sibling_import_fails(tmp_path, importer, target):
    """A section's record reads a sibling's results as declared inputs, never by importing its record or run."""
    graph = _package(tmp_path, {f"syntax/{importer}.py": f"from helpers.surface.{target} import x\nfrom helpers.surface.stats import y\n",
                                f"surface/{target}.py": "", "surface/stats.py": ""})
    assert cross_section_imports(graph) == [f"helpers.syntax.{importer} -> helpers.surface.{target}"]  # stats is fine


def test_a_section_record_imports_its_own_run_claims_and_command(tmp_path):
    graph = _package(tmp_path, {"surface/section.py": "from helpers.surface import run, claims, command, stats\n"
                                                      "from helpers.section import Section\n",
                                "surface/run.py": "", "surface/claims.py": "", "surface/command.py": "",
                                "surface/stats.py": "", "section.py": ""})
    assert out_of_order_imports(graph) == [] and cross_section_imports(graph) == [] and upward_imports(graph) == []


@pytest.mark.parametrize("importer, target", [("stats", "run"), ("stats", "gradients"), ("gradients", "run"),
                                              ("run", "claims"), ("claims", "command"), ("command", "section"),
                                              ("run", "section")])
def test_planted_order_violation_fails(tmp_path, importer, target):
    files = {"surface/stats.py": "", f"surface/{target}.py": "from helpers.surface import stats\n"}
    files[f"surface/{importer}.py"] = f"def f():\n    from helpers.surface import {target}\n"
    graph = _package(tmp_path, files)
    assert out_of_order_imports(graph) == [f"helpers.surface.{importer} -> helpers.surface.{target}"]


# ------------------------------------------------------------------------------- public names


def test_public_names_are_what_the_readme_calls():
    """``import helpers`` gives the functions (not modules) the README uses; the modules keep their paths."""
    import inspect

    import helpers
    import helpers.core.extract

    for name in ("extract", "explore", "load_model", "load_treebank", "encode_words", "attention_for", "encode_ids",
                 "head_label", "iter_attention"):
        assert callable(getattr(helpers, name)) and not inspect.ismodule(getattr(helpers, name)), name
    assert callable(helpers.charts.save_chart) and callable(helpers.views.load_javascript)
    assert helpers.extract is not helpers.core.extract and inspect.ismodule(helpers.core.extract)
    assert set(helpers.__all__) == set(helpers.EXPORTS) and all(hasattr(helpers, n) for n in helpers.__all__)
    assert package_exports() == helpers.EXPORTS  # the graph reads the public names from the source
    with pytest.raises(AttributeError):
        helpers.no_such_name  # noqa: B018


def test_every_public_name_notebooks_and_tests_use_is_exported():
    """``helpers.X`` in the chapters, the tests and the benchmarks names a public name or a sub-package."""
    import re

    root = PACKAGE.parent
    used = set()
    for path in [*root.glob("notebooks/*.ipynb"), *root.glob("tests/**/*.py"), *root.glob("benchmarks/*.py")]:
        if path.resolve() == Path(__file__).resolve():
            continue  # this file names the machinery itself (EXPORTS, a missing name)
        text = path.read_text()
        used |= set(re.findall(r"(?<![\w.])helpers\.([A-Za-z_]\w*)", text))
        used |= {n.strip() for group in re.findall(r"from helpers import ([\w, ]+)", text) for n in group.split(",")}
    import helpers

    subpackages = {module_name(p).split(".")[1] for p in FILES if module_name(p) != "helpers"}
    used = {n for n in used if not n.startswith("__")}  # module attributes (helpers.__file__) are not API
    assert not sorted(used - set(helpers.EXPORTS) - subpackages)


def test_importing_the_package_and_its_core_is_light():
    """``import helpers`` and every ``helpers.core`` module load no pandas, Altair or presentation code, and
    register no chart renderer (a fresh interpreter, so nothing is loaded already)."""
    code = ("import sys, pkgutil, importlib, helpers\n"
            "assert [m for m in sys.modules if m.startswith('helpers')] == ['helpers'], sorted(sys.modules)\n"
            "import helpers.core\n"
            "for m in pkgutil.iter_modules(helpers.core.__path__): importlib.import_module('helpers.core.' + m.name)\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('pandas', 'altair', 'IPython', 'myst_nb')"
            " or m.startswith('helpers.presentation'))\n"
            "assert not heavy, heavy\n")
    _run_fresh(code)


def _run_fresh(code: str) -> None:
    """Run ``code`` in a fresh interpreter that imports this checkout's package; it must succeed."""
    import os
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", code], cwd=PACKAGE.parent, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(PACKAGE.parent)})
    assert done.returncode == 0, done.stderr


def test_chart_renderer_is_set_when_the_first_chart_is_made():
    """In a notebook kernel the offline Altair renderer is enabled by the first chart, not by an import."""
    code = ("import IPython\n"
            "class Shell:\n    kernel = object()\n"
            "IPython.get_ipython = lambda: Shell()\n"  # as if in a kernel
            "import altair as alt, numpy as np\n"
            "from helpers.presentation import charts, views, compare_view\n"
            "assert 'offline' not in alt.renderers.names() and alt.renderers.active == 'default', alt.renderers.active\n"
            "charts.layer_lines({'a': [1.0, 2.0]})\n"
            "assert alt.renderers.active == 'offline', alt.renderers.active\n")
    _run_fresh(code)


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
