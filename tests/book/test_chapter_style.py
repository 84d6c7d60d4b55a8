"""The chapters read like the paper, checked on the notebooks' JSON (nothing is executed):

- figures, tables and chapters are numbered by the book (``{numref}``, ``{doc}``), never typed by hand;
  references to the *paper's* figures and tables ("cf. paper Figure 2", "the paper's Table 1") stay text;
- cells that only feed values to the prose (glue) are not shown in the pages;
- no cell assembles prose from pieces (a multi-line f-string, text joined with ``+``): the package makes it;
- no cell defines a function or a class, or builds a table from rows it writes out (a DataFrame of a literal, a
  list of rows over several lines): the package makes the table, tested there, and the cell shows it;
- every section's chapter runs its section's record (``SECTION.run(lm, ctx)``) and shows
  ``SECTION.claims(report)``, the rows "Results at a glance" shows too: one copy, so no cell checks that
  two copies agree.
"""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
CHAPTERS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
ALL_NOTEBOOKS = sorted(NOTEBOOKS.glob("*.ipynb"))

GLUE_CALLS = {"glue", "glue_text", "glue_claims"}
HIDDEN = {"remove-cell", "remove-input", "hide-input"}  # the code of a plumbing cell never shows
NOT_SHOWN = HIDDEN | {"hide-cell"}  # at most a "click to show" toggle (the setup cells)


def _cells(path: Path, kind: str) -> list[tuple[int, dict, str]]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [(i, c, "".join(c["source"])) for i, c in enumerate(nb["cells"]) if c["cell_type"] == kind]


def _tags(cell: dict) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


# ---------------------------------------------------------------- figure and table numbers

# A caption typed in bold ("**Figure 1**", "**Table 1.**") or a book-style number ("Table 3.1",
# "Figure 2.5"), or a chapter number ("Chapter 2"): the book numbers these, so a typed one drifts.
TYPED = [
    (re.compile(r"\*\*\s*(Figure|Fig\.|Table)\s*\d"), "a caption typed in bold: put it in the cell's mystnb metadata"),
    (re.compile(r"\b(Figures?|Fig\.|Tables?)\s+\d+\.\d+"), "a book-style number typed by hand: use {numref}`label`"),
    (re.compile(r"\bChapters?\s+\d"), "a chapter number typed by hand: use {doc}`text <notebook>`"),
]
# Any other "Figure N" / "Table N" must be the paper's: said so just before it ("paper", "§", the
# authors, Kobayashi et al.), or in a heading or a quotation of the paper.
BARE = re.compile(r"\b(Figures?|Fig\.|Tables?)\s+\d")
PAPER_CONTEXT = re.compile(r"paper|§|authors|Kobayashi|Clark", re.IGNORECASE)
CONTEXT = 60  # characters before the reference in which the paper must be named


def typed_numbers(text: str) -> list[str]:
    """The hand-typed figure, table and chapter numbers of one Markdown text, each with the reason."""
    problems = [f"{m.group(0)!r}: {why}" for pattern, why in TYPED for m in pattern.finditer(text)]
    for line_start, line in _prose_lines(text):
        for m in BARE.finditer(line):
            at = line_start + m.start()
            if text[max(0, at - 2):at] == "**":
                continue  # a bold caption: reported above
            before = " ".join(text[max(0, at - CONTEXT):at].split())
            if not PAPER_CONTEXT.search(before):
                problems.append(f"{m.group(0)!r} after {before[-30:]!r}: say 'paper {m.group(0)}' or use {{numref}}`label`")
    return problems


def _prose_lines(text: str):
    """``(offset, line)`` of the lines that are neither headings nor quotations (which name the paper's
    figures freely)."""
    offset = 0
    for line in text.splitlines(keepends=True):
        if not line.lstrip().startswith(("#", ">")):
            yield offset, line
        offset += len(line)


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=lambda p: p.stem)
def test_no_hand_typed_figure_or_table_numbers(path):
    problems = [f"cell {i}: {p}" for i, _, text in _cells(path, "markdown") for p in typed_numbers(text)]
    assert not problems, f"{path.name}:\n" + "\n".join(problems)


def test_typed_number_rule_on_examples():
    # what a chapter must not write ...
    for text in ("**Figure 1** (cf. paper Figure 2). Each point ...", "**Table 1.** Every claim",
                 "see Chapter 3, Table 3.1", "(Chapter 2, Figure 2.5, same segments)",
                 "These groups are read off Table 1's verdicts", "Figure 3 shows every head"):
        assert typed_numbers(text), text
    # ... and what it may: the paper's numbers, said to be the paper's, or in headings and quotations
    for text in ("(cf. paper Figure 2, top; Kobayashi et al., Figure 3)", "the paper's Figure 2 redrawn",
                 "*Paper §3: Figures 1-4.*", "(§3.2, Figure 2)", "## Examples (Figure 5)", "> see bottom of Figure 2)",
                 "{numref}`fig-surface-gradients` shows", "the paper saw many (Figure 6)"):
        assert not typed_numbers(text), text


# ---------------------------------------------------------------- plumbing cells


def _is_glue(node: ast.AST) -> bool:
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        return False
    func = node.value.func
    return (func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)) in GLUE_CALLS


def only_glue(body: list[ast.stmt]) -> bool:
    """Every statement is a glue call, or a loop or condition over glue calls only."""
    return bool(body) and all(_is_glue(s) or (isinstance(s, (ast.For, ast.If)) and only_glue(s.body) and
                                             (not s.orelse or only_glue(s.orelse))) for s in body)


def shows_nothing_but_glues(tree: ast.Module) -> bool:
    """The cell glues values for the prose and displays nothing: no value as its last statement, no print."""
    calls = [n.func for n in ast.walk(tree) if isinstance(n, ast.Call)]
    names = {f.id if isinstance(f, ast.Name) else getattr(f, "attr", None) for f in calls}
    last = tree.body[-1] if tree.body else None
    displays = isinstance(last, ast.Expr) and not _is_glue(last)
    return bool(names & GLUE_CALLS) and not displays and not names & {"print", "display"}


def _parsed_code_cells(path: Path):
    for i, cell, text in _cells(path, "code"):
        try:
            yield i, cell, ast.parse(text)
        except SyntaxError:  # IPython magics: not plumbing cells
            continue


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=lambda p: p.stem)
def test_plumbing_cells_are_hidden(path):
    problems = []
    for i, cell, tree in _parsed_code_cells(path):
        if only_glue(tree.body) and not _tags(cell) & HIDDEN:
            problems.append(f"cell {i} only glues values: tag it remove-cell (or hide-input)")
        elif shows_nothing_but_glues(tree) and not _tags(cell) & NOT_SHOWN:
            problems.append(f"cell {i} computes values for the prose and shows nothing: tag it remove-cell")
    assert not problems, f"{path.name}:\n" + "\n".join(problems)


def test_plumbing_rule_on_examples():
    assert only_glue(ast.parse('glue_text("a", 1)\n# a comment\nglue_text("b", x, ".1f")\n').body)
    assert only_glue(ast.parse('for k in ks:\n    glue_text(k, 1)\n').body)
    assert not only_glue(ast.parse('glue_text("a", 1)\nchart(x)\n').body)
    assert shows_nothing_but_glues(ast.parse('d = f(x)\nglue_text("d", d)\n'))
    assert not shows_nothing_but_glues(ast.parse('glue_text("d", 1)\ntable(frame)\n'))
    assert not shows_nothing_but_glues(ast.parse('d = f(x)\nchart(d)\n'))


def displays_a_table(tree: ast.Module) -> bool:
    """The cell's last statement is a call of ``table(...)`` (:func:`helpers.presentation.book.table`): it displays
    a MyST ``{table}`` directive."""
    last = tree.body[-1] if tree.body else None
    return (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
            and ast.unparse(last.value.func).split(".")[-1] == "table")


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=lambda p: p.stem)
def test_table_cells_are_parsed_as_myst(path):
    """A cell displaying ``table(...)`` has ``{"mystnb": {"markdown_format": "myst"}}``: without it the book
    renders the directive as a code block of an unknown language (a warning, which fails ``-W`` builds)."""
    problems = [f"cell {i} displays table(...): give it the metadata {{\"mystnb\": {{\"markdown_format\": \"myst\"}}}}"
                for i, cell, tree in _parsed_code_cells(path)
                if displays_a_table(tree) and cell.get("metadata", {}).get("mystnb", {}).get("markdown_format") != "myst"]
    assert not problems, f"{path.name}:\n" + "\n".join(problems)


def test_table_rule_on_examples():
    assert displays_a_table(ast.parse('frame = f(x)\ntable(frame, name="tbl-x", caption="c")\n'))
    assert displays_a_table(ast.parse('book.table(frame, name="tbl-x", caption="c")\n'))
    assert not displays_a_table(ast.parse('t = table(frame, name="tbl-x", caption="c")\n'))
    assert not displays_a_table(ast.parse('table(frame, name="tbl-x", caption="c")\nglue_text("a", 1)\n'))
    assert not displays_a_table(ast.parse('pd.DataFrame(rows)\n'))


def _is_text(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


def assembled_prose(tree: ast.Module) -> list[str]:
    """Where a cell assembles text from pieces (a paragraph belongs in ``helpers/presentation``, tested there, and the
    cell calls the function that makes it): an f-string continued over several lines, or text joined with ``+`` or
    ``+=``. A caption written over several lines (plain strings, nothing filled in) and a one-line f-string are fine."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and node.end_lineno > node.lineno:
            found.append(f"line {node.lineno}: an f-string continued over lines")
        elif (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and (_is_text(node.left) or _is_text(node.right))
              or isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) and _is_text(node.value)):
            found.append(f"line {node.lineno}: text joined with +")
    return found


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=lambda p: p.stem)
def test_no_cell_assembles_prose(path):
    problems = [f"cell {i}, {p}: make the text in helpers/presentation and call it" for i, _, tree in
                _parsed_code_cells(path) for p in assembled_prose(tree)]
    assert not problems, f"{path.name}:\n" + "\n".join(problems)


def test_prose_rule_on_examples():
    # what a cell must not do (chapter 08's findings and sizes note, before they moved to the package) ...
    for code in ('parts = [f"Across ({ids(a)}), "\n         f"{n} claims hold."]\n',
                 'note = ("rows" + ("; small" if small else "") + ").")\n',
                 'note = "a"\nif others:\n    note += f" {x} use reduced sizes"\n'):
        assert assembled_prose(ast.parse(code)), code
    # ... and what it may: a caption over several lines, a one-line f-string, a call that makes the text
    for code in ('table(frame, name="tbl-x",\n      caption="The first line; "\n              "the second.")\n',
                 'glue_text("js_speedup", f"{clustering[\'speedup\']:.0f}")\n',
                 'glue_text("compare_findings", view.findings_text(results))\n', 'n = a + b\n'):
        assert not assembled_prose(ast.parse(code)), code


# ---------------------------------------------------------------- tables and functions are made in the package

FRAME_CALLS = {"DataFrame", "from_records", "from_dict"}  # pd.DataFrame(...), pd.DataFrame.from_records(...) ...
LITERALS = (ast.List, ast.Tuple, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp, ast.GeneratorExp)
ROW = (ast.Tuple, ast.List, ast.Dict)


def defined_functions(tree: ast.Module) -> list[str]:
    """Where a cell defines a function (``def``, ``lambda``) or a class: code to reuse or test lives in ``helpers/``."""
    return [f"line {n.lineno}: a {'class' if isinstance(n, ast.ClassDef) else 'function'} defined in the cell"
            for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda))]


def assembled_tables(tree: ast.Module) -> list[str]:
    """Where a cell builds a table from rows it writes itself: a DataFrame made from a literal (a list, tuple, dict
    or comprehension written in the cell, on one line or several), or a list of two or more rows (tuples, lists,
    dicts) or a comprehension of rows continued over several lines, whatever it is then given to. A DataFrame of
    what a package function returns (``pd.DataFrame(table1_rows(scores))``) is fine."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] in FRAME_CALLS:
            data = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "data"), None)
            if isinstance(data, LITERALS):
                found.append(f"line {node.lineno}: a DataFrame of rows written in the cell")
        elif ((isinstance(node, (ast.List, ast.Tuple)) and len(node.elts) > 1 and all(isinstance(e, ROW) for e in node.elts)
               or isinstance(node, (ast.ListComp, ast.GeneratorExp)) and isinstance(node.elt, ROW))
              and node.end_lineno > node.lineno):
            found.append(f"line {node.lineno}: rows of a table written out over lines")
    return found


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=lambda p: p.stem)
def test_no_cell_defines_functions_or_assembles_tables(path):
    problems = [f"cell {i}, {p}: make it in helpers/ (helpers/presentation for a table), test it there and call it"
                for i, _, tree in _parsed_code_cells(path) for p in defined_functions(tree) + assembled_tables(tree)]
    assert not problems, f"{path.name}:\n" + "\n".join(problems)


def test_function_and_table_rules_on_examples():
    # what a cell must not do (the cells of chapters 02, 04, 07 and the Performance page before issue 53 moved them) ...
    assert defined_functions(ast.parse('def table2_frame(dev, test):\n    rows = []\n    return pd.DataFrame(rows)\n'))
    assert defined_functions(ast.parse('key = lambda r: r["count"]\n'))
    assert defined_functions(ast.parse('class Row:\n    pass\n'))
    for code in ('pd.DataFrame([\n    ("sentences", heads["sentences"]),\n    ("scoring alone (s)", heads["s"]),\n'
                 '], columns=["measure", "value"]).set_index("measure")\n',
                 'table(pd.DataFrame(\n    [("split", "8%", f"{x:.1f}%", "n"),\n     ("sum", "yes", f"{d:.1e}", "c")],\n'
                 '    columns=["claim", "paper", "this model", "note"]), name="tbl-x", caption="c")\n',
                 'frame = pd.DataFrame([{"relation": r["relation"], "count": r["count"],\n'
                 '                       "change": r["change"]} for r in table1]).set_index("relation")\n',
                 'rows = pd.DataFrame({"mean (paper)": m[l, h, w], "first": f[l, h, w]}, index=words).T\n',
                 'table(pd.DataFrame({"token": tokens, "word": [words[w] for w in ids]}), name="tbl-x", caption="c")\n',
                 'pd.DataFrame.from_records([("a", 1)])\n',
                 'rows = [("sentences", n),\n        ("seconds", s)]\ntable(pd.DataFrame(rows), name="tbl-x", caption="c")\n',
                 'rows = [{"head": label(l, h), "accuracy": a[l, h]}\n        for l in range(n) for h in range(m)]\n'):
        assert assembled_tables(ast.parse(code)), code
    # ... and what it may: a frame of a package function's rows, a table call, settings over lines, a one-line list
    for code in ('table(pd.DataFrame(table1_rows(test.scores)).set_index("relation"), name="tbl-x", caption="c")\n',
                 'table(chapters.norms_table1(table1), name="tbl-x",\n      caption="c")\n', 'extraction_table(extraction)\n',
                 'SIZES = {"extraction": ctx.sized(200, 40),\n         "heads": ctx.sized(300, 60)}\n',
                 'builds = {spec: recorded("book_build", spec) for spec in ("default", "mpnet-base")}\n',
                 'charts.layer_lines({"[SEP]": sep, "[CLS]": cls}, pairs=[("a", 1), ("b", 2)])\n',
                 'for name, value in SIZES.items():\n    glue_text(f"size_{name}", value)\n'):
        assert not assembled_tables(ast.parse(code)) and not defined_functions(ast.parse(code)), code


# ---------------------------------------------------------------- chapters run their section's record


def calls_its_record(tree: ast.Module, key: str) -> bool:
    """``from helpers.<key>.section import SECTION``, then ``SECTION.run(lm, ctx...)`` and ``SECTION.claims(...)``."""
    imported = any(isinstance(n, ast.ImportFrom) and n.module == f"helpers.{key}.section"
                   and any(a.name == "SECTION" and a.asname is None for a in n.names) for n in ast.walk(tree))
    calls = [c for c in ast.walk(tree) if isinstance(c, ast.Call)]
    runs = any(ast.unparse(c.func) == "SECTION.run" and [ast.unparse(a) for a in c.args[:2]] == ["lm", "ctx"]
               for c in calls)
    return imported and runs and any(ast.unparse(c.func) == "SECTION.claims" for c in calls)


def checks_a_copy(tree: ast.Module) -> bool:
    """An ``assert`` on claims, or a call of ``section_claims``: a second copy of the chapter's claims."""
    return any((isinstance(n, ast.Assert) and "claims" in ast.unparse(n)) or
               (isinstance(n, ast.Call) and ast.unparse(n.func).endswith("section_claims")) for n in ast.walk(tree))


def _sections():
    from helpers.results import SECTIONS

    return SECTIONS


@pytest.mark.parametrize("key", [s.key for s in _sections()])
def test_chapter_runs_its_section_record(key):
    record = next(s for s in _sections() if s.key == key)
    path = NOTEBOOKS / f"{record.chapter}.ipynb"
    assert path.is_file(), f"section {key}: its chapter {path.name} does not exist"
    i, cell, tree = next(iter(_parsed_code_cells(path)))
    assert calls_its_record(tree, key), (
        f"{path.name}: the setup cell must import SECTION from helpers.{key}.section, run SECTION.run(lm, ctx) and "
        "show SECTION.claims(report)")
    copies = [j for j, _, t in _parsed_code_cells(path) if checks_a_copy(t)]
    assert not copies, f"{path.name}: cells {copies} check a second copy of the claims; the record is the only one"


def test_every_chapter_with_claims_is_a_section():
    """A chapter that glues claims is the chapter of a section's record."""
    chapters = {s.chapter for s in _sections()}
    glued = {p.stem for p in CHAPTERS if any("glue_claims" in text for _, _, text in _cells(p, "code"))}
    assert glued <= chapters, sorted(glued - chapters)


def test_record_rule_on_examples():
    good = ("from helpers.surface.section import SECTION\nreport = SECTION.run(lm, ctx)\n"
            "claims = SECTION.claims(report)\n")
    assert calls_its_record(ast.parse(good), "surface")
    assert not calls_its_record(ast.parse(good), "syntax")
    assert not calls_its_record(ast.parse(good.replace("SECTION.run(lm, ctx)", "run_surface(lm)")), "surface")
    assert not calls_its_record(ast.parse("from helpers.surface.run import run_surface\nclaims = claims(run_surface(lm))\n"),
                                "surface")
    copy = ('if small_run():\n    from helpers.results import section_claims\n'
            '    assert [c.to_json() for c in claims] == [c.to_json() for c in section_claims("surface", lm)]\n')
    assert checks_a_copy(ast.parse(copy)) and not checks_a_copy(ast.parse(good))
