"""The Methods page's table of every claim (book/methods.md, §Every claim, its statistic and its rule) against the
code: each claim the sections make has exactly one row, no row names a claim that no section makes, and the paper's
claims in the newest recorded ``claims --json`` are judged by the rule, null and level the table states."""
from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
METHODS = ROOT / "book" / "methods.md"
RESULTS = ROOT / "benchmarks" / "results"


def table_rows() -> dict[str, list[str]]:
    """``{claim id: the row's cells}`` of the table (a row may name several ids, each maps to the same cells)."""
    text = METHODS.read_text()
    start = text.index("### Every claim, its statistic and its rule")
    section = text[start:text.index("\n(methods-", start)]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        for cid in re.findall(r"`([^`]+)`", cells[0]):
            assert cid not in rows, f"{METHODS}: claim {cid} has two rows"
            rows[cid] = cells
    return rows


KEBAB = re.compile(r"[a-z]+(?:-[a-z]+)+$")  # the shape of a claim id


def code_ids() -> set[str]:
    """Every claim id the sections' claims modules make, read from their code: each kebab-case string that is the
    first argument of a call (``claim("x", ...)``), the first item of a tuple (a table of claims), a value assigned to
    a name or held in a dict (``cid = "x"``, ``{"det": "det-head"}``), and the ids made by an f-string over the kinds
    of ``SHRINK_KINDS`` (``f"norm-shrink-{kind}"``)."""
    ids: set[str] = set()
    for path in sorted((ROOT / "helpers").glob("*/claims.py")):
        source = path.read_text()
        tree = ast.parse(source)
        candidates = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and node.args:
                candidates.append(node.args[0])
            elif isinstance(node, ast.Tuple) and node.elts:
                candidates.append(node.elts[0])
            elif isinstance(node, ast.Assign):
                candidates.append(node.value)
            elif isinstance(node, ast.Dict):
                candidates += node.values
        ids |= {c.value for c in candidates
                if isinstance(c, ast.Constant) and isinstance(c.value, str) and KEBAB.match(c.value)}
        kinds = next((ast.literal_eval(node.value) for node in ast.walk(tree) if isinstance(node, ast.AnnAssign)
                      and getattr(node.target, "id", None) == "SHRINK_KINDS"), ())
        for template in re.findall(r'f"([a-z-]+)\{kind\}"', source):
            ids |= {template + k for k in kinds}
    return ids


def test_every_claim_has_one_row_and_every_row_a_claim():
    rows, ids = table_rows(), code_ids()
    assert len(ids) > 40  # the reading of the code found the claims (a broken reading finds none)
    assert sorted(ids - set(rows)) == [], f"{METHODS}: claims without a row in the table"
    assert sorted(set(rows) - ids) == [], f"{METHODS}: rows of claims no section makes"


def newest_claims_recording() -> dict | None:
    found = sorted(RESULTS.glob("claims-default-*.json"))
    return json.loads(found[-1].read_text()) if found else None


def _number(text: str) -> float:
    """A level as the table writes it: ``0.5``, ``−1``, ``50%``, or ``3.8 nats / log 128`` (nats over the uniform
    entropy of that many tokens)."""
    if "/ log" in text:
        nats, tokens = text.split("/ log")
        return float(nats.split()[0]) / math.log(float(tokens))
    return float(text.replace("−", "-").rstrip("%"))


def test_the_recorded_paper_claims_follow_the_table():
    """Each row of the newest recording with a rule: the table names its rule first; an effect's null is the table's;
    a within's range is written in the table's level."""
    data = newest_claims_recording()
    if data is None:
        pytest.skip("no recorded claims-default-DATE.json")
    rows = table_rows()
    checked = 0
    for row in data["claims"]:
        assert row["id"] in rows, f"{METHODS}: no row for the recorded claim {row['id']}"
        if row.get("rule") is None:
            continue
        _, _, null, level, rule, _ = rows[row["id"]]
        assert rule.split(" ")[0] == row["rule"], row["id"]
        if row["rule"] == "effect":
            assert _number(null) == row["null"], row["id"]
        if row["rule"] == "within":
            low, high = (_number(x) for x in re.search(r"\[([^,\]]+), ([^\]]+)\]", level).groups()[:2])
            assert row["range"] == pytest.approx([low, high], rel=1e-9), row["id"]
        checked += 1
    assert checked or all(r.get("rule") is None for r in data["claims"])
