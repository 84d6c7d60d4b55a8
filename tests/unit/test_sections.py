"""The section records (helpers.results.SECTIONS) and the run's context (helpers.context.RunContext):
one record per section, iterated by every registry; settings read once, at the entry points."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from claim_rows import claim_as
from helpers.claims import Claim
from helpers.context import RunContext
from helpers.results import PAPER_SECTIONS, SECTIONS, section, section_of
from helpers.section import MAX_LENGTH, Section, Sizes

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "helpers"


# ------------------------------------------------------------------------------------ the records


def test_each_section_once_in_the_papers_order():
    keys = [s.key for s in SECTIONS]
    assert keys == ["surface", "syntax", "coref", "probe", "cluster", "norms", "sinks", "mixing", "ablation",
                    "minimal_pairs"]
    assert [s.paper for s in PAPER_SECTIONS] == ["§3", "§4.2", "§4.3", "§5", "§6"]
    assert [s.key for s in SECTIONS if not s.in_paper] == ["norms", "sinks", "mixing", "ablation", "minimal_pairs"]
    for s in SECTIONS:  # a section reads only sections before it (their reports exist when it runs)
        assert set(s.inputs) <= set(keys[: keys.index(s.key)]), s.key


@pytest.mark.parametrize("record", SECTIONS, ids=lambda s: s.key)
def test_record_names_its_chapter_package_and_command(record: Section):
    assert (ROOT / "notebooks" / f"{record.chapter}.ipynb").is_file(), record.chapter
    assert record.chapter.split("_", 1)[1] == record.key  # chapter, package and key share a name
    assert (PACKAGE / record.key / "section.py").is_file()
    assert record.command.handler.__module__ == f"helpers.{record.key}.command"
    assert set(record.sizes.full) == set(record.sizes.small)


def test_sizes_are_the_modules_constants():
    """The records refer to the run modules' constants, whose values are those the book was built with."""
    from helpers.coref import run as coref
    from helpers.probe import run as probe
    from helpers.surface import run as surface
    from helpers.syntax import run as syntax

    assert (surface.SEGMENTS, surface.SMALL_SEGMENTS, syntax.SMALL_SENTENCES, coref.SMALL_DOCUMENTS) == (1000, 40, 150, 4)
    assert (probe.EPOCHS, probe.SMALL_EPOCHS, probe.SMALL_SENTENCES, probe.SEEDS) == (3, 2, 300, (0, 1, 2))
    pick = {s.key: (s.sizes.pick(False), s.sizes.pick(True)) for s in SECTIONS}
    assert pick["surface"][0]["n_segments"] == surface.SEGMENTS and pick["surface"][1]["n_segments"] == surface.SMALL_SEGMENTS
    assert pick["cluster"][0]["n_segments"] == surface.SEGMENTS and pick["norms"][1]["n_segments"] == surface.SMALL_SEGMENTS
    assert pick["syntax"][0]["max_sentences"] is None and pick["syntax"][1]["max_sentences"] == syntax.SMALL_SENTENCES
    assert pick["coref"][0]["max_documents"] is None and pick["coref"][1]["max_documents"] == coref.SMALL_DOCUMENTS
    same = {"seeds": probe.SEEDS, "glove": None, "treebanks": probe.probe_corpora()}
    assert pick["probe"][0] == {"max_length": MAX_LENGTH, "max_sentences": None, "epochs": probe.EPOCHS, **same}
    assert pick["probe"][1] == {"max_length": MAX_LENGTH, "max_sentences": probe.SMALL_SENTENCES,
                                "epochs": probe.SMALL_EPOCHS, **same}


def test_settings_and_inputs_are_checked():
    record = section("probe")
    assert record.settings(RunContext(small=True), epochs=5, max_sentences=None)["epochs"] == 5
    assert record.settings(RunContext(small=True), max_sentences=None)["max_sentences"] == 300  # None keeps the size
    with pytest.raises(TypeError, match="n_segments"):
        record.settings(RunContext(), n_segments=3)
    with pytest.raises(ValueError, match="surface, syntax, coref"):
        section("cluster").run(None, RunContext())
    with pytest.raises(ValueError, match="name different settings"):
        Sizes(full={"a": 1}, small={"b": 1})


def test_cli_table_lists_every_section():
    from helpers.cli import COMMANDS, SECTION_COMMANDS

    for record in SECTIONS:
        assert record.command in COMMANDS, record.key
        assert SECTION_COMMANDS[record.command.name] is record  # its handler is handed its record's run
    assert [c.name for c in COMMANDS if c in {s.command for s in SECTIONS}] == [s.command.name for s in SECTIONS]


class _Ran(Exception):
    """Raised by a stand-in for a section's run: what the command asked for."""


def _asked(record: Section, argv: list[str], monkeypatch) -> tuple[RunContext, dict]:
    """``(ctx, settings)`` that ``record``'s command hands its run for the options ``argv``."""
    import importlib

    from helpers.cli import build_parser

    module = importlib.import_module(record.command.handler.__module__)
    monkeypatch.setattr(module, "load", lambda args: "the model")

    def run(lm, ctx, **settings):
        assert lm == "the model"
        raise _Ran(ctx, settings)

    args = build_parser().parse_args([record.command.name, *argv])
    with pytest.raises(_Ran) as ran:
        record.command.handler(args, run)
    return ran.value.args


@pytest.mark.parametrize("record", SECTIONS, ids=lambda s: s.key)
def test_a_command_runs_its_record_at_its_settings(record: Section, monkeypatch):
    """One path: a section's command hands its record's run (nothing else: its module calls no ``run_*``), and
    with no size option it runs it at the record's settings in the full configuration, whatever
    ``$BERT_ATTENTION_SMALL`` says (the options' defaults are those settings)."""
    monkeypatch.setenv("BERT_ATTENTION_SMALL", "1")
    argv = ["--conllu", "gum:test"] if record.command.name == "heads" else []
    ctx, settings = _asked(record, argv, monkeypatch)
    full = record.settings(RunContext(small=False))
    assert not ctx.small and settings and set(settings) <= set(full)
    assert {k: tuple(v) if k == "seeds" else v for k, v in settings.items()} == {k: full[k] for k in settings}
    source = (PACKAGE / record.key / "command.py").read_text()
    called = {ast.unparse(n.func) for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)}
    assert not {c for c in called - {"run_context"} if c.split(".")[-1].startswith(("run_", "extract"))}, called
    assert "run" in called


def test_a_commands_options_reach_its_run(monkeypatch):
    """The options set the run's settings (planted: a size other than the default reaches the record's run)."""
    ctx, settings = _asked(section("cluster"), ["--segments", "7", "--permutations", "9", "--max-length", "60",
                                                "--segments-from", "paragraphs", "--seed", "3"], monkeypatch)
    assert settings == {"n_segments": 7, "n_perm": 9, "max_length": 60, "segments_from": "paragraphs", "seed": 3}
    ctx, settings = _asked(section("probe"), ["--seeds", "2", "--test", "a.conllu", "--epochs", "1"], monkeypatch)
    assert settings["seeds"] == (0, 1) and settings["epochs"] == 1
    assert settings["treebanks"] == {"train": "gum:train", "dev": "gum:dev", "test": "a.conllu"}


def test_each_record_says_what_it_reads_once():
    """``Section.corpora`` is the one list of what a section's runs read: the corpus check of ``claims`` and
    ``compare`` checks their union, and the build plan lists its passes from them."""
    from helpers.data.corpora import corpus_read
    from helpers.results import corpora

    reads = {s.key: [corpus_read(c) for c in s.corpora] for s in SECTIONS}
    assert reads["surface"] == [("segments", "gum:train"), ("segments", "gum:dev")]
    assert reads["coref"] == [("coreference", "dev"), ("coreference", "test")]
    assert {source for kind, source in reads["syntax"]} < {source for kind, source in reads["probe"]}
    assert corpora(PAPER_SECTIONS) == ("segments:gum:train", "segments:gum:dev", "gum:test", "gum:dev", "ewt:dev",
                                       "ontogum:dev", "ontogum:test", "gum:train")


def test_a_commands_corpus_check_is_its_records_reads(monkeypatch):
    """A section command checks, before its model loads, what its record reads with the options given
    (``Section.command_reads``: its corpora and the input sections' reads its ``when`` turns on), nothing typed in
    the command; every ``when`` names a read the record or an input makes and an option the command or record has."""
    from helpers.cli import build_parser
    from helpers.pipeline import argtypes

    parser = build_parser()
    checked = []
    monkeypatch.setattr(argtypes, "check_corpora", lambda args, *specs: checked.append(specs))

    def check(*argv):
        checked.clear()
        args = parser.parse_args(list(argv))
        args.check_inputs(args)
        return checked[-1]

    assert check("surface") == ("segments:gum:train", "segments:gum:dev")
    assert check("surface", "--no-gradients") == ("segments:gum:train",)
    assert check("cluster") == ("segments:gum:train", "gum:dev", "ontogum:dev")  # the heads it marks: §4.2's, §4.3's
    assert check("cluster", "--no-linguistic") == ("segments:gum:train",)
    assert check("norms") == check("sinks") == ("segments:gum:train",)  # Table 1's norms are the chapter's part
    assert check("heads", "--conllu", "my.conllu") == ("my.conllu",)  # its file, not GUM test, GUM dev and EWT dev
    assert check("coref") == ("ontogum:test", "ontogum:dev")
    assert check("probe", "--test", "a.conllu") == ("gum:train", "gum:dev", "a.conllu")
    assert section("norms").command_reads({"table1": True}) == ("segments:gum:train", "gum:test")
    for record in SECTIONS:
        options = {a.dest for a in parser._subparsers._group_actions[0].choices[record.command.name]._actions}
        for read, option in record.when.items():
            head, _, corpus = read.partition(":")
            assert read in record.corpora or (head in record.inputs and corpus in section(head).corpora), read
            assert option in options or option in record.sizes.full or read in record.corpora, (record.key, option)


@pytest.mark.parametrize("argv", [
    ["heads", "--conllu", "{own}", "--max-sentences", "2"],
    ["probe", "--train", "{own}", "--dev", "{own}", "--test", "{own}"],
], ids=["heads", "probe"])
def test_a_command_given_its_own_files_opens_no_other_corpus(argv, tmp_path, toy_conllu, monkeypatch):
    """A section command whose options name its corpora checks those and nothing else before its model loads (its
    options replace its record's corpora: ``Command.reads``): given its own file, with ``--data-dir`` an empty folder
    (where GUM and EWT would be looked for), the whole preflight passes and parses that file only."""
    from helpers import cli
    from helpers.data import corpora

    own = tmp_path / "own.conllu"
    own.write_bytes(toy_conllu.read_bytes())
    empty = tmp_path / "no-corpora"
    empty.mkdir()
    parsed = []
    read = corpora._read
    monkeypatch.setattr(corpora, "_read", lambda path, *a, **k: parsed.append(Path(path)) or read(path, *a, **k))
    monkeypatch.setattr(cli, "check_model_option", lambda args: None)  # the model is not what is checked here
    args = cli.build_parser().parse_args([a.format(own=own) for a in argv]
                                         + ["--data-dir", str(empty), "--cache-dir", str(tmp_path / "cache")])
    cli.preflight(args)
    assert set(parsed) == {own.resolve()}


def test_coref_checks_the_splits_it_is_given(toy_data, tmp_path, monkeypatch):
    """``coref --split test --select-on test`` reads OntoGUM test only: its check opens no GUM dev document."""
    from helpers import cli
    from helpers.data import corpora

    parsed = []
    read = corpora._read
    monkeypatch.setattr(corpora, "_read", lambda path, *a, **k: parsed.append(Path(path).stem) or read(path, *a, **k))
    monkeypatch.setattr(cli, "check_model_option", lambda args: None)
    args = cli.build_parser().parse_args(["coref", "--split", "test", "--select-on", "test", "--data-dir", str(toy_data),
                                          "--cache-dir", str(tmp_path / "cache")])
    cli.preflight(args)
    assert sorted(set(parsed)) == ["GUM_c", "GUM_toy_coref"]  # GUM test's documents (dev's: GUM_b, GUM_dev_coref)
    assert section("coref").command_reads(vars(args)) == ("ontogum:test",)
    assert section("coref").command_reads({**vars(args), "select_on": "dev"}) == ("ontogum:test", "ontogum:dev")


def test_the_plan_follows_the_records_reads(monkeypatch):
    """Planted: a record that reads one more treebank gets a pass over it in the build plan (nothing is listed
    in plan.py), and the claims' corpus check checks it."""
    from dataclasses import replace

    import helpers.results as results
    from helpers.plan import model_passes

    def sections_of(p, corpus):
        return next(x.sections for x in p if x.input == corpus)

    ctx = RunContext(small=True)
    before = model_passes("default", ctx, control=False)
    assert sections_of(before, "gum:train") == ("5", "mixing")
    assert sections_of(before, "gum:test") == ("4.2", "5", "norms", "mixing", "ablation")
    assert sections_of(before, "segments") == ("3", "6", "norms", "sinks")  # the sinks chapter runs its record on the book model too
    assert "gum:test2" not in results.corpora(PAPER_SECTIONS)
    syntax = replace(section("syntax"), corpora=(*section("syntax").corpora, "gum:test2"))
    monkeypatch.setattr(results, "SECTIONS", tuple(syntax if s.key == "syntax" else s for s in SECTIONS))
    monkeypatch.setattr(results, "PAPER_SECTIONS", tuple(syntax if s.key == "syntax" else s for s in PAPER_SECTIONS))
    after = model_passes("default", ctx, control=False)
    assert sections_of(after, "gum:test2") == ("4.2",)
    assert sections_of(after, "coreference dev (truncated)") == ("4.3", "mixing")  # the context-mixing chapter's windows
    assert [p.input for p in after if ":" in p.input] == ["gum:train", "gum:dev", "gum:test", "gum:test2", "ewt:dev"]
    assert "gum:test2" in results.corpora(results.PAPER_SECTIONS)


def test_claim_sections_map_to_records():
    from helpers.compare.run import SECTIONS as JSON_SECTIONS
    from helpers.compare.run import section_key
    from helpers.presentation.summary import chapter_of

    def claim(where: str) -> Claim:
        return claim_as("x", where, "partly", None)

    expect = {"§3.1": "03_surface", "§3.2": "03_surface", "§3": "03_surface", "§4.2": "04_syntax", "§4.3": "04_coref",
              "§5": "05_probe", "§6": "06_cluster"}
    assert {w: chapter_of(claim(w)) for w in expect} == expect
    assert JSON_SECTIONS == ("3", "4.2", "4.3", "5", "6") and section_key("§4.3") == "4.3"
    with pytest.raises(ValueError):
        section_of(claim("§4.1"))  # no such section: not silently §4.2's or §6's
    with pytest.raises(ValueError):
        section_of(claim("beyond §3.2"))


# ------------------------------------------------------------------------------------ the context


def test_context_reads_the_environment_once(monkeypatch, tmp_path):
    monkeypatch.setenv("BERT_ATTENTION_SMALL", "1")
    monkeypatch.setenv("BERT_ATTENTION_REFRESH", "1")
    monkeypatch.setenv("BERT_ATTENTION_CACHE", str(tmp_path / "c"))
    monkeypatch.setenv("BERT_ATTENTION_MODEL", "some-model")
    ctx = RunContext.from_env()
    assert ctx.small and ctx.refresh and ctx.cache_dir == (tmp_path / "c").resolve() and ctx.model == "some-model"
    assert not RunContext.from_env(small=False).small  # an entry point's own options win
    for name in ("BERT_ATTENTION_SMALL", "BERT_ATTENTION_REFRESH", "BERT_ATTENTION_CACHE", "BERT_ATTENTION_MODEL"):
        monkeypatch.delenv(name)
    # what was read stays: the sizes follow the context, not the environment of the moment
    assert ctx.small and section("surface").settings(ctx)["n_segments"] == 40
    assert section("surface").settings(RunContext(small=False))["n_segments"] == 1000
    monkeypatch.setenv("BERT_ATTENTION_SMALL", "1")
    from helpers.plan import book_passes

    book = [p for p in book_passes(RunContext(small=False, compare="default")) if p.input == "segments"]
    assert book[0].option["n_segments"] == 1000  # the context says full, whatever the environment says


def test_refresh_is_the_contexts(tmp_path, monkeypatch):
    """Cached results are recomputed inside an active context with ``refresh``, and only there: the
    variable itself is read by the entry point, not by the cache."""
    from helpers.data.cache import cached_json

    calls = []

    def compute():
        calls.append(1)
        return {"n": len(calls)}

    assert cached_json("t", {"k": 1}, compute, cache_root=tmp_path) == {"n": 1}
    monkeypatch.setenv("BERT_ATTENTION_REFRESH", "1")
    assert cached_json("t", {"k": 1}, compute, cache_root=tmp_path) == {"n": 1}  # the cache does not read it
    with RunContext.from_env().active():
        assert cached_json("t", {"k": 1}, compute, cache_root=tmp_path) == {"n": 2}
    with RunContext(refresh=False).active():
        assert cached_json("t", {"k": 1}, compute, cache_root=tmp_path) == {"n": 2}


# The entry points: the CLI (``helpers.cli``, and ``context(args)`` in ``helpers.pipeline.options``, which builds its
# context) and the context every entry point builds (``helpers.context``: ``RunContext.from_env``). Only they read the
# environment: ``helpers.config`` names the variables and holds the functions that read them (:func:`config_readers`),
# which only ``helpers.context`` and the CLI call; ``RunContext.from_env`` is called by the CLI only (a chapter, a
# benchmark and the comparison's child are entry points outside the package). Nothing else may: no exception.
CONFIG = "helpers.config"
CONTEXT = "helpers.context"
CLI = {"helpers.cli", "helpers.pipeline.options"}


def config_readers(source: str | None = None) -> set[str]:
    """The functions of ``helpers.config`` (``source``: its text) that read the environment: directly
    (``os.environ``, ``os.getenv``), or by calling one that does."""
    tree = ast.parse(source if source is not None else (PACKAGE / "config.py").read_text())
    functions = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    readers = {name for name, f in functions.items() if _reads_os_environment(f)}
    while True:
        more = {name for name, f in functions.items() if name not in readers and any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in readers for n in ast.walk(f))}
        if not more:
            return readers
        readers |= more


def _reads_os_environment(tree: ast.AST) -> bool:
    return any((isinstance(n, ast.Attribute) and n.attr in ("environ", "getenv", "environb", "putenv"))
               or (isinstance(n, ast.ImportFrom) and n.module == "os"
                   and any(a.name in ("environ", "getenv", "environb", "putenv") for a in n.names))
               for n in ast.walk(tree))


def _environment_uses(tree: ast.AST, readers: set[str] | None = None) -> tuple[bool, set[str], bool]:
    """``(reads os.environ / os.getenv itself, config's readers it names, calls RunContext.from_env)``."""
    readers = config_readers() if readers is None else readers
    aliases = {"config"}  # names helpers.config goes by here
    named: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "helpers":
            aliases |= {a.asname or a.name for a in node.names if a.name == "config"}
        elif isinstance(node, ast.Import):
            aliases |= {a.asname for a in node.names if a.name == CONFIG and a.asname}
        elif isinstance(node, ast.ImportFrom) and node.module == CONFIG:
            named |= {a.name for a in node.names} & readers
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in readers and ast.unparse(node.value) in (*aliases, CONFIG):
            named.add(node.attr)
    from_env = any(isinstance(n, ast.Attribute) and n.attr == "from_env" and ast.unparse(n.value).endswith("RunContext")
                   for n in ast.walk(tree))
    return _reads_os_environment(tree), named, from_env


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def environment_readers(package: Path = PACKAGE) -> list[str]:
    """Every module below the entry points that reads the environment, and how."""
    found = []
    for path in sorted(package.rglob("*.py")):
        module = ".".join(path.relative_to(package.parent).with_suffix("").parts).removesuffix(".__init__")
        direct, named, from_env = _environment_uses(ast.parse(path.read_text(), str(path)))
        if direct and module not in (CONFIG, *CLI):
            found.append(f"{module}: os.environ")
        if named and module not in (CONFIG, CONTEXT, *CLI):
            found.append(f"{module}: helpers.config.{', '.join(sorted(named))}")
        if from_env and module not in (CONTEXT, *CLI):
            found.append(f"{module}: RunContext.from_env")
    return found


def test_only_the_entry_points_read_the_environment():
    """Below the entry points a folder, a device or a switch comes from the context (passed, or in force:
    :mod:`helpers.context`'s resolvers), never from the environment."""
    assert environment_readers() == [], "read the environment (take a RunContext, or what it holds, instead)"


def test_the_environment_rule_can_fail(tmp_path):
    """The readers are found in config's source (none is listed by hand), and a planted read below the entry
    points fails the rule, however it is written."""
    readers = config_readers()
    assert {"cache_dir", "data_dir", "model_name", "hub_offline", "requested_device", "assets_dir", "small_run",
            "refresh_results", "compare_specs"} <= readers
    assert "check_device" not in readers and "_default_data_candidates" not in readers  # they read no variable
    assert config_readers("import os\ndef a():\n    return os.environ\ndef b():\n    return a()\ndef c():\n    pass\n") == {"a", "b"}
    for planted in ("from helpers.config import cache_dir\ncache_dir()\n", "from helpers import config\nconfig.cache_dir(None)\n",
                    "import helpers.config as settings\nsettings.data_dir()\n", "def f():\n    from helpers.config import hub_offline\n"):
        assert _environment_uses(ast.parse(planted))[1], planted
    assert _environment_uses(ast.parse("import os\nx = os.environ.get('A')\n"))[0]
    assert _environment_uses(ast.parse("from os import getenv\n"))[0]
    assert _environment_uses(ast.parse("from helpers.context import RunContext\nRunContext.from_env()\n"))[2]
    assert _environment_uses(ast.parse("from helpers.config import check_device, DATA_ENV\n")) == (False, set(), False)
    package = tmp_path / "helpers"  # a module below the entry points with a planted cache_dir() call
    (package / "data").mkdir(parents=True)
    (package / "data" / "cache.py").write_text("from helpers import config\n\n\ndef root():\n    return config.cache_dir(None)\n")
    (package / "context.py").write_text("from helpers import config\nconfig.cache_dir(None)\n")
    assert environment_readers(package) == ["helpers.data.cache: helpers.config.cache_dir"]


# ------------------------------------------------------------------ the summary equals the records' claims


def test_all_claims_is_the_records_claims(tiny_lm, toy_data, tmp_path):
    """``results.all_claims`` on the tiny model is the concatenation of each paper section's
    ``SECTION.claims(SECTION.run(...))``, each record run on its own (inputs made for it alone)."""
    from helpers.compare.run import claim_from_json
    from helpers.results import all_claims, input_reports

    sizes = dict(n_segments=3, max_sentences=100, max_documents=4, seeds=(0,), epochs=1, n_perm=20, max_length=60)
    ctx = RunContext.from_env(data_dir=toy_data, cache_dir=tmp_path / "cache", small=False)
    together = [c.to_json() for c in all_claims(tiny_lm, ctx, **sizes)]
    alone = []
    for record in PAPER_SECTIONS:
        own = {k: v for k, v in sizes.items() if k in record.settings(ctx)}
        report = record.run(tiny_lm, ctx, inputs=input_reports(record, tiny_lm, ctx, **sizes), **own)
        alone += [c.to_json() for c in record.claims(report)]
    assert together == alone and len({c["id"] for c in together}) == len(together)
    rows = [claim_from_json(c) for c in together]  # each JSON row read back with its rule's fields
    assert [section_of(c).key for c in rows] == sorted((section_of(c).key for c in rows),
                                                       key=[s.key for s in SECTIONS].index)


def test_reports_compute_only_the_parts_read(monkeypatch):
    """A report computes a part when it is first read, once, inside its context: §6 reading §4.2's dev run
    costs no test or EWT run, and ``claims`` reads no part it does not need."""
    from helpers.context import refresh_requested
    from helpers.syntax import section as syntax_section

    calls = []

    def fake_run_heads(lm, corpus, ctx, **kw):
        calls.append((corpus, kw["max_sentences"], refresh_requested()))
        return corpus

    monkeypatch.setattr(syntax_section, "run_heads", fake_run_heads)
    report = syntax_section.SECTION.run(None, RunContext(small=True, refresh=True))
    assert calls == []
    assert report.dev == "gum:dev" and report.dev == "gum:dev"
    assert calls == [("gum:dev", 150, True)]  # once, at the small size, with the context's refresh in force


def test_cli_reads_refresh_once_and_the_cache_obeys(tiny_model_dir, toy_data, tmp_path, monkeypatch):
    """``$BERT_ATTENTION_REFRESH=1`` (the memory benchmark's switch) still recomputes a command's cached
    results: the CLI reads it into its context, which the cache obeys while the command runs."""
    from helpers.cli import main

    args = ["surface", "--model", str(tiny_model_dir), "--segments", "3", "--max-length", "60", "--no-gradients",
            "--data-dir", str(toy_data), "--cache-dir", str(tmp_path / "cache"), "--quiet", "--json", str(tmp_path / "o.json")]
    monkeypatch.delenv("BERT_ATTENTION_REFRESH", raising=False)
    assert main(args) == 0
    (stats,) = (tmp_path / "cache" / "artifacts").glob("surface-stats-*.json")
    first = stats.stat().st_ino
    assert main(args) == 0 and stats.stat().st_ino == first  # read back, not rewritten
    monkeypatch.setenv("BERT_ATTENTION_REFRESH", "1")
    assert main(args) == 0 and stats.stat().st_ino != first  # recomputed and written again (atomically)


def test_below_the_entry_points_the_context_in_force_wins(tmp_path, monkeypatch):
    """What a call below the entry points leaves unnamed (a cache or corpora folder, a device, the model, the
    hub switch) is the active context's, not the environment's; outside any context (a library call) it is what
    ``RunContext.from_env`` would read, and a folder named in the call wins over both."""
    from helpers.context import cache_folder, data_folder, device_for, hub_offline, model_for
    from helpers.data.cache import cached_json

    monkeypatch.setenv("BERT_ATTENTION_CACHE", str(tmp_path / "env-cache"))
    monkeypatch.setenv("BERT_ATTENTION_MODEL", "env-model")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("BERT_ATTENTION_DEVICE", raising=False)
    data = tmp_path / "data"
    data.mkdir()
    assert cache_folder() == (tmp_path / "env-cache").resolve() and model_for() == "env-model" and hub_offline()
    ctx = RunContext(data_dir=data, cache_dir=tmp_path / "ctx-cache", device="cpu", model="ctx-model", offline=False)
    with ctx.active():
        assert cache_folder() == tmp_path / "ctx-cache" and data_folder() == data and device_for() == "cpu"
        assert model_for() == "ctx-model" and model_for("named") == "named" and not hub_offline()
        assert cache_folder(tmp_path / "named") == tmp_path / "named"
        cached_json("t", {"k": 1}, lambda: {"n": 1})
    assert list((tmp_path / "ctx-cache" / "artifacts").glob("t-*.json")) and not (tmp_path / "env-cache").exists()
    assert model_for() == "env-model"  # the context is in force only inside its block
