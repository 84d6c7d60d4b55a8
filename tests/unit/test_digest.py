"""Cache keys from the code: :func:`~helpers.digest.code_digest` follows the import closure of what computes a
result, leaves prose out, and is the only code key in the package (no module list, no version constant); a
cached result is recomputed when the code that computes it changes, and only then.

Edits are made to a copy of the package (``tmp_path``), read by a fresh interpreter, never to this tree."""
from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from helpers.digest import PACKAGE, code_digest, code_text, import_closure, import_graph
from tolerances import decimals

ENCODING_FUNCTION = "\n\ndef a_new_function(x):\n    return x + 1\n"


def _copy(tmp_path: Path) -> Path:
    """A copy of the package under ``tmp_path / "copy"`` (returns the folder to put on ``PYTHONPATH``)."""
    shutil.copytree(PACKAGE, tmp_path / "copy" / "helpers", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "copy"


def _digests(root: Path, cache: Path | None = None, parsed: list | None = None) -> dict[str, str]:
    """``{module: code_digest(module)}`` for every module of the package at ``root`` (a fresh interpreter that
    imports only ``helpers.digest`` from there; ``cache``: its cache folder, where the parse memo is kept, else
    the test's). ``parsed``: extended with the files that interpreter parsed."""
    code = ("import ast, json, sys\nparse = ast.parse\nfiles = []\n"
            "ast.parse = lambda source, name='<unknown>', *a, **k: files.append(name) or parse(source, name, *a, **k)\n"
            "from helpers.digest import code_digest, import_graph\n"
            "print(json.dumps({m: code_digest(m) for m in import_graph()}))\nprint(json.dumps(files))\n")
    env = {**os.environ, "PYTHONPATH": str(root)}
    if cache is not None:
        env["BERT_ATTENTION_CACHE"] = str(cache)
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    digests, files = (json.loads(line) for line in done.stdout.splitlines()[:2])
    if parsed is not None:
        parsed.extend(files)
    return digests


# ------------------------------------------------------------------------------------ the digest


def test_code_digest_names_a_function_its_module_or_the_module_name():
    import helpers.surface.run as run

    assert code_digest(run.surface_statistics) == code_digest(run) == code_digest("helpers.surface.run")
    assert len(code_digest(run)) == 16
    assert code_digest(run) != code_digest("helpers.surface.stats")
    with pytest.raises(ValueError, match="not a module of"):
        code_digest(json.dumps)  # outside the package: the key follows the package's own code
    with pytest.raises(ValueError, match="not a module of"):
        import_closure("helpers.surface.no_such_module")


def test_the_digest_is_computed_once_per_process():
    """Each module's digest and each closure's are kept for the process: a key costs a dictionary look-up."""
    from helpers import digest

    code_digest("helpers.surface.run")
    reads = digest._module_digest.cache_info().misses
    for _ in range(1000):
        code_digest("helpers.surface.run")
    assert digest._module_digest.cache_info().misses == reads


def test_the_closure_follows_lazy_imports_and_public_names(tmp_path):
    """The import graph the closure walks is the layer test's: lazy and relative imports, and a public name
    imported from the package as the module that defines it."""
    root = tmp_path / "helpers"
    files = {"__init__.py": 'EXPORTS = {"explore": "helpers.data.things"}\n',
             "core/__init__.py": "", "core/a.py": "def f():\n    from ..data import b\n",
             "data/__init__.py": "", "data/b.py": "from helpers import explore\n",
             "data/things.py": "import helpers.core.c\n", "core/c.py": "X = 1\n", "core/alone.py": ""}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    code = "from helpers.digest import import_closure as c\nprint(sorted(c('helpers.core.a')))\n"
    for own in ("digest.py", "context.py", "config.py"):  # the digest and what it imports (where its memo goes)
        shutil.copy(PACKAGE / own, root / own)
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == str(["helpers.core.a", "helpers.core.c", "helpers.data.b", "helpers.data.things"])


# ---------------------------------------------------------- (3) the closures hold what the lists left out


def test_surface_statistics_closure_holds_the_encoding():
    """surface/run.py's hand list (stats, reduce) left out core.encoding, so an edit there served stale numbers."""
    from helpers.surface.run import surface_statistics

    closure = import_closure(surface_statistics)
    assert {"helpers.core.encoding", "helpers.surface.stats", "helpers.reduce", "helpers.core.extract",
            "helpers.data.cache", "helpers.pipeline.segments", "helpers.data.segments"} <= closure
    assert "helpers.presentation.views" not in closure and "helpers.cli" not in closure  # only what it imports


def test_probe_closure_holds_extraction_word_level_and_conllu():
    """The probe's hand list (probes, batches, run) left out core.extract, core.wordlevel and data.conllu_io; the
    route is in it."""
    import helpers.probe.run as run

    assert {"helpers.core.extract", "helpers.core.wordlevel", "helpers.data.conllu_io", "helpers.probe.stats",
            "helpers.pipeline.route", "helpers.probe.run"} <= import_closure(run._run_probes)


def test_compare_claims_follow_what_all_claims_runs():
    """The compared claims are keyed by the closure of :func:`helpers.results.all_claims` (every section's run
    and claims), not by every file of the package: the presentation and the CLI are not in it."""
    from helpers.results import all_claims

    closure = import_closure(all_claims)
    assert {f"helpers.{s}.claims" for s in ("surface", "syntax", "coref", "probe", "cluster", "norms")} <= closure
    assert not {m for m in closure if m.startswith(("helpers.presentation", "helpers.compare"))}
    assert "helpers.cli" not in closure and "helpers.plan" not in closure


def test_each_cached_result_is_keyed_by_the_code_that_computes_it(monkeypatch):
    import helpers.cluster.run as cluster
    import helpers.norms.run as norms
    import helpers.surface.run as surface
    from helpers.data.cache import cache_key

    lm = SimpleNamespace(fingerprint=lambda: "m", token_types=True)
    batch = SimpleNamespace(digest=lambda: "d", max_length=8)
    assert surface.stats_key(lm, batch)["code"] == code_digest(surface.surface_statistics)
    assert norms.stats_key(lm, batch)["code"] == code_digest(norms.norm_statistics)
    assert cluster.distances_key(lm, batch)["code"] == code_digest(cluster.js_distances)
    assert "segments_v" not in surface.stats_key(lm, batch)  # the batch digest and the code digest cover it
    weights = cache_key(lm, batch, level="word", word_mode="mean", shard_size=4)
    norm_maps = cache_key(lm, batch, level="word", word_mode="mean", shard_size=4, maps="norms")
    import helpers.digest as digest

    monkeypatch.setattr(digest, "_closure_digest", lambda name: "changed")  # as if any code changed
    assert cache_key(lm, batch, level="word", word_mode="mean", shard_size=4) == weights  # maps: keyed by data
    assert cache_key(lm, batch, level="word", word_mode="mean", shard_size=4, maps="norms") != norm_maps


# ------------------------------------------------ (1), (2) code recomputes, prose does not: a copy of the package


def test_a_code_edit_changes_the_keys_that_import_it_and_prose_changes_none(tmp_path):
    root = _copy(tmp_path)
    before = _digests(root)
    encoding = root / "helpers" / "core" / "encoding.py"
    source = encoding.read_text()
    tree = ast.parse(source)
    assert ast.get_docstring(tree) and any(isinstance(n, ast.ClassDef) and ast.get_docstring(n) for n in tree.body)
    prose = source.replace('"""', '"""Edited prose. ', 1)  # the module docstring
    prose = prose.replace("    def digest(self) -> str:\n        \"\"\"", "    def digest(self) -> str:  # a comment\n"
                          "        # another comment\n        \"\"\"Edited. ", 1)
    assert prose.count("Edited") == 2 and "# another comment" in prose
    encoding.write_text(prose + "\n# a trailing comment\n")
    assert _digests(root) == before, "a docstring or comment edit changed a cache key"

    encoding.write_text(source + ENCODING_FUNCTION)
    after = _digests(root)
    changed = {m for m in before if before[m] != after[m]}
    graph = import_graph()
    importers = {m for m in graph if "helpers.core.encoding" in import_closure(m)}
    assert changed == importers  # exactly the results whose code imports the encoding, directly or not
    assert {"helpers.surface.run", "helpers.probe.run", "helpers.norms.stats", "helpers.cluster.run"} <= changed
    assert "helpers.paper" not in changed and "helpers.cluster.stats" not in changed


def test_the_parse_memo_gives_the_same_keys_and_spares_the_next_process_the_parsing(tmp_path):
    """The first process parses every module and keeps what it read in the cache folder; the next parses only the
    package's ``__init__`` for its public names (:func:`~helpers.digest.package_exports`) and finds the same keys; an edited file is parsed again (its key
    moves), and a damaged memo is read as empty (the same keys, every file parsed again)."""
    root, cache = _copy(tmp_path), tmp_path / "cache"
    first, second, third = [], [], []
    reference = _digests(root, cache, first)
    assert len(first) > 100
    (memo,) = (cache / "code").glob("digest-memo.*.json")
    umask = os.umask(0o022)
    os.umask(umask)
    assert memo.stat().st_mode & 0o777 == 0o666 & ~umask  # as every file of the cache: shareable as the umask says
    assert _digests(root, cache, second) == reference
    assert second == ["<unknown>"]  # the package's __init__ (package_exports), read for its public names
    encoding = root / "helpers" / "core" / "encoding.py"
    encoding.write_text(encoding.read_text() + ENCODING_FUNCTION)
    edited = _digests(root, cache, third)
    assert [Path(f).relative_to(root).as_posix() for f in third if f != "<unknown>"] == ["helpers/core/encoding.py"]
    assert edited["helpers.core.encoding"] != reference["helpers.core.encoding"]
    assert edited["helpers.paper"] == reference["helpers.paper"]
    kept = json.loads(memo.read_text())
    for entry in kept["entries"].values():  # every digest falsified, the checksum left as it was
        entry["code"] = "0" * 64
    memo.write_text(json.dumps(kept))
    again = []
    assert _digests(root, cache, again) == edited and len(again) == len(first)
    memo.write_text(memo.read_text()[:100])  # cut short
    assert _digests(root, cache) == edited
    blocked = tmp_path / "blocked"
    blocked.write_text("")  # a file where the cache folder should be: nothing can be kept, the keys are the same
    assert _digests(root, blocked) == edited


def test_a_full_memo_keeps_the_most_recently_used_entries(tmp_path, monkeypatch):
    """Past :attr:`~helpers.digest.ParseMemo.KEEP` entries, the memo drops those least recently used: four processes,
    each using one file of its own, with room for three, keep the last three files' entries."""
    from helpers.digest import ParseMemo

    monkeypatch.setattr(ParseMemo, "KEEP", 3)
    files = [tmp_path / f"m{i}.py" for i in range(4)]
    for i, f in enumerate(files):
        f.write_text(f"X = {i}\n")

    def process(*used: int) -> set[int]:
        """One process's memo using ``used``; returns the files it had to parse."""
        memo, parsed = ParseMemo(tmp_path / "cache"), set()
        for i in used:
            memo.changed = False
            memo.facts(files[i])
            if memo.changed:
                parsed.add(i)
        memo.changed = bool(parsed)
        memo.save()
        return parsed

    for i in range(4):
        assert process(i) == {i}
    assert process(1, 2, 3) == set()  # kept: the three most recently used
    assert process(0) == {0}  # the least recently used was dropped


def _surface(root: Path, model: Path, data: Path, cache: Path, out: Path, home: Path | None = None) -> dict:
    """``python -m helpers surface --segments 3 --no-gradients`` with the package found at ``root`` (``home``: its
    ``$HOME``, with no ``$BERT_ATTENTION_CACHE``)."""
    env = {**os.environ, "PYTHONPATH": str(root), "HF_HUB_OFFLINE": "1"}
    if home is not None:
        env = {**{k: v for k, v in env.items() if k != "BERT_ATTENTION_CACHE"}, "HOME": str(home)}
    done = subprocess.run([sys.executable, "-m", "helpers", "surface", "--segments", "3", "--no-gradients",
                           "--model", str(model), "--data-dir", str(data), "--cache-dir", str(cache),
                           "--json", str(out), "--quiet"], cwd=root, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())


def test_an_encoding_edit_recomputes_the_surface_statistics(tiny_model_dir, fake_data, tmp_path):
    """The reproduced bug: with the statistics cached, a new function in core/encoding.py and the same command
    served the cached statistics (the key listed surface/stats.py and reduce.py only). Now it recomputes them;
    a docstring and comment edit after that reads them back."""
    root = _copy(tmp_path)
    cache, home = tmp_path / "cache", tmp_path / "home"
    home.mkdir()
    first = _surface(root, tiny_model_dir, fake_data, cache, tmp_path / "a.json", home=home)
    stored = lambda: {f: f.stat().st_mtime_ns for f in cache.glob("artifacts/surface-stats-*.json")}  # noqa: E731
    assert len(stored()) == 1
    # the code keys' parse memo is kept in the command's --cache-dir, which its checks read under: nothing elsewhere
    assert len(list(cache.glob("code/digest-memo.*.json"))) == 1 and not list(home.rglob("*"))
    encoding = root / "helpers" / "core" / "encoding.py"
    encoding.write_text(encoding.read_text() + ENCODING_FUNCTION)
    second = _surface(root, tiny_model_dir, fake_data, cache, tmp_path / "b.json")
    assert len(stored()) == 2, "the cached statistics were served after core/encoding.py changed"
    assert second == first  # the same numbers: the new function computes nothing
    kept = stored()
    encoding.write_text(encoding.read_text().replace('"""', '"""Prose only. ', 1) + "# a comment\n")
    assert _surface(root, tiny_model_dir, fake_data, cache, tmp_path / "c.json") == first
    assert stored() == kept  # read back, not recomputed


NORM_RESULT = "return NormStats(self.weights / self.count, self.norms / self.count, spearman, self.count, self.causal,"


def _norms_json(package_root: Path, model: Path, data: Path, cache: Path, out: Path) -> dict:
    """``python -m helpers norms`` run with the package found at ``package_root`` (a fresh interpreter)."""
    env = {**os.environ, "PYTHONPATH": str(package_root), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "helpers", "norms", "--segments", "3", "--model", str(model),
                           "--data-dir", str(data), "--cache-dir", str(cache), "--json", str(out), "--quiet"],
                          cwd=package_root, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())


def test_changed_norm_statistics_code_recomputes_the_cached_result(tiny_model_dir, fake_data, tmp_path):
    """A copy of the package computes and caches the norm statistics; its ``norms/stats.py`` is then changed
    (the weight shares halved): the same command with the same cache recomputes (stale numbers were served
    while the key carried only a hand-bumped version) and a third run, code unchanged, reads the cache."""
    copy = _copy(tmp_path)
    cache = tmp_path / "cache"
    first = _norms_json(copy, tiny_model_dir, fake_data, cache, tmp_path / "a.json")
    stats_py = copy / "helpers" / "norms" / "stats.py"
    source = stats_py.read_text()
    assert NORM_RESULT in source, "the test's edit no longer applies: update NORM_RESULT"
    stats_py.write_text(source.replace(NORM_RESULT, NORM_RESULT.replace("self.weights / self.count", "self.weights / self.count / 2")))
    second = _norms_json(copy, tiny_model_dir, fake_data, cache, tmp_path / "b.json")
    w1, w2 = first["layers"]["1"]["weights"]["other"], second["layers"]["1"]["weights"]["other"]
    # tolerance: the JSON keeps 6 decimals: w2 rounded once, w1 rounded and then halved
    assert w2 == pytest.approx(w1 / 2, rel=0, abs=1.5 * decimals(6)), \
        "stale norm statistics were served after the code changed"
    assert second["layers"]["1"]["norms"] == first["layers"]["1"]["norms"]
    stored = {f: f.stat().st_mtime_ns for f in cache.glob("artifacts/norm-stats-*.json")}
    assert len(stored) == 2  # one result per version of the code
    assert _norms_json(copy, tiny_model_dir, fake_data, cache, tmp_path / "c.json") == second
    assert {f: f.stat().st_mtime_ns for f in cache.glob("artifacts/norm-stats-*.json")} == stored  # read, not rewritten


def test_code_text_leaves_out_docstrings_and_comments_only(tmp_path):
    a, b, c = tmp_path / "a.py", tmp_path / "b.py", tmp_path / "c.py"
    a.write_text('"""Module."""\nclass K:\n    """Class."""\n    def f(self):\n        """F."""\n        return 1\n')
    b.write_text('# comment\n\n\nclass K:\n    def f(self):  # why\n        "another prose string"\n        return 1\n')
    c.write_text('class K:\n    def f(self):\n        return "1"\n')
    assert code_text(a) == code_text(b) != code_text(c)


# --------------------------------------------------------------------- (4) no hand-kept key anywhere


def hand_kept_keys(package: Path) -> list[str]:
    """``"module:line: what"`` for each code key kept by hand in the package at ``package``: a call of
    ``source_digest`` (the old digest of listed modules), a ``code_digest`` call given more than one module (or a
    starred list), a constant holding a list of the package's module names, a ``VERSION``/``FORMAT`` constant
    other than the map shards' layout (``data/cache.py``'s ``FORMAT_VERSION``), and a digest of the package's
    files outside ``digest.py``."""
    found = []
    for path in sorted(package.rglob("*.py")):
        name = ".".join(path.relative_to(package.parent).with_suffix("").parts)
        if name == f"{package.name}.digest":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            where = f"{name}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Call):
                func = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
                if func == "source_digest":
                    found.append(f"{where}: source_digest() of listed modules")
                elif func == "code_digest" and (len(node.args) != 1 or node.keywords
                                                or isinstance(node.args[0], ast.Starred)):
                    found.append(f"{where}: code_digest() of several modules")
                elif func in ("glob", "rglob") and any(isinstance(a, ast.Constant) and str(a.value).endswith(".py")
                                                       for a in node.args):
                    found.append(f"{where}: a digest of the package's files")
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
                value = node.value
                if isinstance(value, (ast.Tuple, ast.List, ast.Set)) and any(
                        isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value.startswith(f"{package.name}.")
                        for e in value.elts):
                    found.append(f"{where}: a list of modules ({', '.join(names)})")
                for n in names:
                    if (n.endswith("VERSION") or n.endswith("FORMAT")) and not (
                            name == f"{package.name}.data.cache" and n == "FORMAT_VERSION"):
                        found.append(f"{where}: a version constant ({n})")
    return found


def test_no_module_keeps_a_hand_list_or_a_version_constant():
    assert hand_kept_keys(PACKAGE) == []


@pytest.mark.parametrize("planted, what", [
    ('CODE = ("helpers.surface.stats", "helpers.reduce")\n', "a list of modules (CODE)"),
    ('from helpers.digest import code_digest\nK = code_digest("helpers.surface.stats", "helpers.reduce")\n',
     "code_digest() of several modules"),
    ('from helpers.digest import code_digest\nM = ["a"]\nK = code_digest(*M)\n', "code_digest() of several modules"),
    ('def key(source_digest):\n    return source_digest("helpers.core.encoding")\n', "source_digest() of listed modules"),
    ("PARSE_VERSION = 3\n", "a version constant (PARSE_VERSION)"),
    ("FORMAT = 1\n", "a version constant (FORMAT)"),
    ('import pathlib\nFILES = sorted(pathlib.Path("helpers").rglob("*.py"))\n', "a digest of the package's files"),
])
def test_a_planted_hand_kept_key_fails(tmp_path, planted, what):
    root = tmp_path / "helpers"
    (root / "surface").mkdir(parents=True)
    (root / "data").mkdir()
    (root / "data" / "cache.py").write_text("FORMAT_VERSION = 2\n")  # the one layout number: allowed
    (root / "surface" / "run.py").write_text("from helpers.digest import code_digest\nK = code_digest(len)\n" + planted)
    found = hand_kept_keys(root)
    assert len(found) == 1 and found[0].startswith("helpers.surface.run:") and found[0].endswith(what), found
