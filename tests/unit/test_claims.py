"""Verdict rules on constructed results, on both sides of every threshold, and the claims' data layout."""
import json

import numpy as np
import pytest

from helpers import paper
from helpers.cluster import claims as cl
from helpers.coref import claims as co
from helpers.norms import claims as no
from helpers.probe import claims as pr
from helpers.surface import claims as su
from helpers.syntax import claims as sy
from helpers.syntax.run import run_heads, table1_relations
from helpers.claims import (
    FIELDS,
    NOT_REPRODUCED,
    RULE_FIELDS,
    PARTLY,
    REPRODUCED,
    Claim,
    at_most_partly_if_overlaps,
    by_id,
    overlaps,
    verdict,
)
from helpers.presentation.book import claims_table

EPS = 1e-6  # a step just across a threshold


# ------------------------------------------------------------------------------- shared rules


def test_verdict_and_interval_cap():
    assert verdict(True) == REPRODUCED and verdict(False, True) == PARTLY and verdict(False) == NOT_REPRODUCED
    assert overlaps((71.9, 84.7), 74.9) and not overlaps((71.9, 84.7), 70.0, 85.0)
    assert overlaps(None, 1.0) and overlaps((float("nan"), 3.0), 100.0)  # unknown interval: nothing established
    assert at_most_partly_if_overlaps(REPRODUCED, (71.9, 84.7), 74.9) == PARTLY
    assert at_most_partly_if_overlaps(REPRODUCED, (75.0, 84.7), 74.9) == REPRODUCED
    assert at_most_partly_if_overlaps(NOT_REPRODUCED, (71.9, 84.7), 74.9) == NOT_REPRODUCED  # never raised


def test_claim_layout_and_ids():
    c = Claim("det-head", "§4.2", "claim", "94.3", "90.0", float("nan"), PARTLY)
    assert list(c.to_json()) == [*FIELDS, *RULE_FIELDS] and c.value is None  # NaN is stored as "no value"
    json.dumps(c.to_json())
    with pytest.raises(ValueError, match="verdict"):
        Claim("x", "§3", "c", "p", "o", 1.0, "maybe")
    with pytest.raises(ValueError, match="twice"):
        by_id([c, c])
    table = claims_table([c])
    assert table.loc["det-head", "verdict"] == PARTLY and not table.isna().any().any()


# ------------------------------------------------------------------------ the paper's numbers, once


CLAIMS_MODULES = [su, sy, co, pr, cl, no]


def _paper_facts():
    """Numbers and texts of the paper that a claims module could type by hand: the tables' cells, the
    reported values (integers up to 12, layer and head counts, are too common to tell apart) and the
    lists of layers and heads."""
    numbers, texts = set(), set()
    rows = [*paper.TABLE1.values(), *paper.TABLE2.values(), tuple(paper.TABLE3.values())]
    values = [v.value for v in vars(paper).values() if isinstance(v, paper.Reported)]
    for item in [*rows, *values]:
        for x in (item if isinstance(item, tuple) else (item,)):
            if isinstance(x, (int, float)) and not isinstance(x, bool) and not (isinstance(x, int) and x <= 12):
                numbers.add(x)
            elif isinstance(x, str) and "-" in x:
                texts.add(x)  # head labels ("8-11", "5-4")
    texts |= {", ".join(map(str, v)) for v in values if isinstance(v, tuple) and all(isinstance(x, int) for x in v)}
    texts |= {f"{a}-{b}" for a, b in [paper.SEP_MAJORITY_LAYERS.value]}
    return numbers - {0.5}, texts  # 0.5 is also a threshold of ours (half)


def test_paper_numbers_live_in_paper_py_only():
    """A claims module reads the paper's numbers from helpers.paper by name; none is typed in its code."""
    import ast
    import inspect

    numbers, texts = _paper_facts()
    assert {94.3, 65, 77, 3.89, 128} <= numbers and {"8-11", "5-4", "2, 4, 7, 8", "6-10"} <= texts
    for module in CLAIMS_MODULES:
        tree = ast.parse(inspect.getsource(module))
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
                      and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Constant) or id(node) in docstrings:
                continue
            if isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
                assert node.value not in numbers, f"{module.__name__}:{node.lineno}: paper number {node.value} typed"
            elif isinstance(node.value, str):
                typed = [t for t in texts if t in node.value]
                assert not typed, f"{module.__name__}:{node.lineno}: paper text {typed} typed in {node.value!r}"


def test_paper_rows_by_name_and_probe_rows_mapped():
    assert paper.TABLE1["det"].head == "8-11" and paper.TABLE1["det"].offset == 1
    assert paper.TABLE2[paper.COREF_HEAD_ROW].nominal == 58 and paper.TABLE2["Neural coref"].pronoun is None
    probes = ["Right-branching", "Distances + words", "Random-init Attn + words", "Attn", "Attn + words"]
    assert [paper.table3(p) for p in probes] == [26, 58, 30, 61, 77]
    assert set(paper.TABLE3_ROWS.values()) <= set(paper.TABLE3)
    assert paper.table3("Attn + words (original misalignment)") is None  # ours only: no paper row


def test_surface_claims_show_the_papers_numbers():
    """The "paper" column is built from helpers.paper: the texts the book and `claims` have always shown."""
    from helpers.surface.stats import STATISTICS, SurfaceStats

    stats = SurfaceStats({k: np.zeros((4, 2)) for k in STATISTICS}, uniform_entropy=3.0, n_segments=1)
    got = {c.id: c for c in su._claims(stats, {"sep": [1.0] * 4, "other": [1.0] * 4})}
    assert got["prev-token-heads"].paper == "4 (layers 2, 4, 7, 8)"
    assert got["next-token-heads"].paper == "5 (layers 1, 2, 2, 3, 6)"
    assert got["prev-token-heads"].claim == "heads with >50% attention on the previous token"
    assert got["sep-attention-middle-layers"].paper == "layers 6-10 of 12"
    assert got["sep-self-attention"].claim == "at [SEP], heads attend >90% to [SEP]" and got["sep-self-attention"].paper == ">90%"
    assert got["broad-attention-lower-layers"].paper == "layer 1 (Figure 4)"
    assert got["cls-broad-last-layer"].paper == "3.89 nats (128-token segments)"
    assert got["sep-gradient-small"].paper == "very small from layer 5 on"


# ---------------------------------------------------------------------------------- §3 surface


def test_surface_rules_both_sides():
    t = su.POSITION_PARTLY
    assert su.verdict_position_heads(1, 0.6) == REPRODUCED
    assert su.verdict_position_heads(0, t + EPS) == PARTLY
    assert su.verdict_position_heads(0, t - EPS) == NOT_REPRODUCED
    for rule, full, part in ((su.verdict_sep_layers, su.SEP_MAJORITY, su.SEP_MAJORITY_PARTLY),
                             (su.verdict_sep_self, su.SEP_SELF, su.SEP_SELF_PARTLY)):
        assert rule(full + EPS) == REPRODUCED and rule(full - EPS) == PARTLY
        assert rule(part + EPS) == PARTLY and rule(part - EPS) == NOT_REPRODUCED
    assert su.verdict_broad_lower_layers(0, 6) == REPRODUCED
    assert su.verdict_broad_lower_layers(2, 6) == PARTLY and su.verdict_broad_lower_layers(3, 6) == NOT_REPRODUCED
    u = 4.0
    b = su.BROAD_ENTROPY_FRACTION
    assert su.verdict_cls_broad(b * u + EPS, u, 10.0) == REPRODUCED
    assert su.verdict_cls_broad(b * u - EPS, u, 1.0) == PARTLY
    assert su.verdict_cls_broad(1.0 - EPS, u, 1.0) == NOT_REPRODUCED
    g = su.GRADIENT_SMALL
    assert su.verdict_sep_gradient(g - EPS) == REPRODUCED and su.verdict_sep_gradient(g + EPS) == PARTLY
    assert su.verdict_sep_gradient(1.0 + EPS) == NOT_REPRODUCED


def test_surface_claims_ids_from_constructed_stats():
    from helpers.surface.stats import STATISTICS, SurfaceStats

    per_head = {k: np.zeros((4, 2)) for k in STATISTICS}
    per_head["prev"][1, 1] = 0.3  # strongest previous-token head between the partly threshold and 50%
    per_head["sep"][2] = 0.3
    per_head["entropy"][1] = 2.0
    stats = SurfaceStats(per_head, uniform_entropy=3.0, n_segments=1)
    grads = {"sep": [1.0, 1.0, 0.1, 0.1], "other": [1.0, 1.0, 1.0, 1.0]}
    report = su.SurfaceReport("toy", {}, stats, grads, None, None)
    got = {c.id: c for c in su.claims(report)}
    assert list(got) == ["prev-token-heads", "next-token-heads", "sep-attention-middle-layers", "sep-self-attention",
                         "broad-attention-lower-layers", "cls-broad-last-layer", "sep-gradient-small"]
    assert got["prev-token-heads"].verdict == PARTLY and got["next-token-heads"].verdict == NOT_REPRODUCED
    # tolerance: a ratio of constructed floats (pytest.approx: relative 1e-6)
    assert got["sep-attention-middle-layers"].verdict == PARTLY and got["sep-attention-middle-layers"].value == pytest.approx(0.3)
    assert got["broad-attention-lower-layers"].verdict == PARTLY and got["broad-attention-lower-layers"].value == 2
    # tolerance: a ratio of constructed floats (relative 1e-6)
    assert got["sep-gradient-small"].value == pytest.approx(0.1) and got["sep-gradient-small"].verdict == REPRODUCED
    # the surface command's JSON keeps its claim/paper/ours/verdict rows
    # the surface command's JSON "claims" keeps its claim/paper/ours/verdict keys (and adds id, section, value)
    rows = [c.to_json() for c in su.claims(report)]
    assert {"claim", "paper", "ours", "verdict"} <= set(rows[0]) and rows[0]["id"] == "prev-token-heads"


# ----------------------------------------------------------------------------------- §4.2 syntax


def test_syntax_rules_both_sides():
    assert sy.verdict_single_head_all(sy.GOOD_PARSER - EPS) == REPRODUCED
    assert sy.verdict_single_head_all(sy.GOOD_PARSER + EPS) == NOT_REPRODUCED
    base, narrow = 40.0, lambda acc: (acc - 1, acc + 1)
    for acc, want in ((base + sy.SPECIALISED_MARGIN + EPS, REPRODUCED), (base + sy.SPECIALISED_MARGIN - EPS, PARTLY),
                      (base + sy.SPECIALISED_PARTLY + EPS, PARTLY), (base + sy.SPECIALISED_PARTLY - EPS, NOT_REPRODUCED)):
        assert sy.verdict_relation_head(acc, base, narrow(acc)) == want, acc
    # a 20-point gain whose interval reaches down to the baseline is "partly" at best
    assert sy.verdict_relation_head(60.0, base, (base - EPS, 80.0)) == PARTLY
    assert sy.verdict_relation_head(60.0, base, (base + EPS, 80.0)) == REPRODUCED
    assert sy.verdict_specialised_heads(5, 10) == REPRODUCED and sy.verdict_specialised_heads(4, 10) == PARTLY
    assert sy.verdict_specialised_heads(0, 10) == NOT_REPRODUCED
    n = 14
    assert sy.verdict_direction(n - sy.DIRECTION_EXCEPTIONS, n) == REPRODUCED
    assert sy.verdict_direction(n - sy.DIRECTION_EXCEPTIONS - 1, n) == PARTLY
    assert sy.verdict_direction(n // 2, n) == PARTLY and sy.verdict_direction(n // 2 - 1, n) == NOT_REPRODUCED


def test_syntax_claims_on_toy_treebank(tiny_lm, toy_conllu):
    from helpers.syntax.run import table1_relations
    from helpers.syntax.stats import ALL, DIRECTIONS

    run = run_heads(tiny_lm, str(toy_conllu), max_length=60)
    got = sy.claims(table1_relations(run.scores), sy.held_out(run, run, n_boot=50))
    ids = [c.id for c in got]
    assert ids == ["single-head-parsing-all", "det-head", "obj-head", "poss-head", "auxpass-head", "prt-head",
                   "specialised-heads", "dependent-attends-to-head"]
    assert all("nan" not in c.ours.lower() for c in got)
    # Each verdict from the run's own table: dev is test here, so the head chosen on dev is the table's best head.
    table = run.scores.table()
    listed = [r for r in table1_relations(run.scores) if r != ALL]
    gains = {r: table[r]["accuracy"] - table[r]["baseline_accuracy"] for r in listed}
    n_specialised = sum(g >= sy.SPECIALISED_MARGIN for g in gains.values())
    n_dep_to_head = sum(table[r]["direction"] == DIRECTIONS[0] for r in listed)
    want = {"single-head-parsing-all": sy.verdict_single_head_all(table[ALL]["accuracy"]),
            "specialised-heads": sy.verdict_specialised_heads(n_specialised, len(listed)),
            "dependent-attends-to-head": sy.verdict_direction(n_dep_to_head, len(listed))}
    for rel, claim_id in sy.CLAIM_RELATIONS.items():
        if rel not in table:
            want[claim_id] = NOT_REPRODUCED  # no word of the relation in the toy treebank: nothing established
        else:  # the toy's heads gain at most SPECIALISED_PARTLY: "not reproduced" whatever the interval
            assert table[rel]["accuracy"] - table[rel]["baseline_accuracy"] <= sy.SPECIALISED_PARTLY, rel
            want[claim_id] = NOT_REPRODUCED
    assert {c.id: c.verdict for c in got} == want


# ------------------------------------------------------------------------------------ §4.3 coref


def test_coref_rule_both_sides():
    hm, rb = 50.0, 70.0
    far = lambda acc: (acc - 0.5, acc + 0.5)  # an interval that holds neither baseline
    assert co.verdict_coref_head(hm + co.COREF_MARGIN + 3 + EPS, hm, hm + 8, far(63 + EPS)) == REPRODUCED
    acc = rb - co.COREF_CLOSE - EPS  # beats head match by far, but more than 5 points below the rule-based system
    assert co.verdict_coref_head(acc, hm, rb, far(acc)) == PARTLY
    acc = rb - co.COREF_CLOSE + EPS
    assert co.verdict_coref_head(acc, hm, rb, far(acc)) == REPRODUCED
    acc = hm + co.COREF_MARGIN - EPS  # close to neither: 10 points over head match is not "over 10"
    assert co.verdict_coref_head(acc, hm, 80.0, far(acc)) == NOT_REPRODUCED
    assert co.verdict_coref_head(acc, hm, acc + co.COREF_CLOSE, far(acc)) == PARTLY
    # the case: 78.5 [71.9, 84.7] against the rule-based 74.9 is "partly" at best
    assert co.verdict_coref_head(78.5, 60.0, 74.9, (71.9, 84.7)) == PARTLY
    assert co.verdict_coref_head(78.5, 60.0, 74.9, (75.0, 84.7)) == REPRODUCED


def test_coref_claims_need_whole_documents():
    run = co.CorefRun("test", "truncated", np.zeros((1, 1, 0), bool), np.zeros((3, 0), bool), np.array([]),
                      np.array([], int), 0, [])
    with pytest.raises(ValueError, match="windows"):
        co.claims(run, run)


def test_coref_claim_from_constructed_runs():
    n = 40
    kinds = np.array(["pronoun", "proper", "nominal", "nominal"] * (n // 4))
    docs = np.repeat(np.arange(n // 4), 4)
    heads = np.zeros((2, 2, n), bool)
    heads[1, 0] = np.arange(n) % 10 < 9  # head 2-1: 90%
    base = np.stack([np.arange(n) % 10 < 2, np.arange(n) % 10 < 5, np.arange(n) % 10 < 7])  # 20, 50, 70
    run = co.CorefRun("test", "windows", heads, base, kinds, docs, n // 4, [])
    (claim,) = co.claims(run, run)
    # tolerance: a percentage of constructed counts (relative 1e-6)
    assert claim.id == "coref-head" and claim.value == pytest.approx(90.0)
    assert "2-1" in claim.ours and claim.verdict == REPRODUCED  # 90 > 50 + 10, above 70 - 5, interval clear of both


# ----------------------------------------------------------------------------------- §5 probes


def test_probe_rules_both_sides():
    tight = lambda x: (x - 0.1, x + 0.1)
    rb = 30.0
    assert pr.verdict_probe_attn(rb + pr.PROBE_GAIN + EPS, rb, tight(rb + 10)) == REPRODUCED
    assert pr.verdict_probe_attn(rb + pr.PROBE_GAIN - EPS, rb, tight(rb + 10)) == PARTLY
    assert pr.verdict_probe_attn(rb - EPS, rb, tight(rb)) == NOT_REPRODUCED
    assert pr.verdict_probe_attn(rb + 20, rb, (rb - 1, rb + 40)) == PARTLY  # seeds too spread to separate
    attn, dist = 50.0, 55.0
    assert pr.verdict_probe_attn_words(attn + pr.PROBE_GAIN + EPS, attn, dist, tight(60)) == REPRODUCED
    assert pr.verdict_probe_attn_words(attn + pr.PROBE_GAIN - EPS, attn, dist, tight(60)) == PARTLY
    assert pr.verdict_probe_attn_words(dist - EPS, attn, dist + 20, tight(55)) == PARTLY  # beats Attn, not distances
    assert pr.verdict_probe_attn_words(attn - EPS, attn, dist, tight(50)) == NOT_REPRODUCED
    aw = 70.0
    assert pr.verdict_probe_random_init(aw, aw - pr.PROBE_GAIN - EPS, tight(aw)) == REPRODUCED
    assert pr.verdict_probe_random_init(aw, aw - pr.PROBE_GAIN + EPS, tight(aw)) == NOT_REPRODUCED
    assert pr.verdict_probe_random_init(aw, 40.0, (35.0, 90.0)) == PARTLY


def test_seed_interval_against_scipy():
    from scipy import stats

    runs = [60.0, 61.0, 63.0]
    lo, hi = pr.seed_interval(runs)
    ref = stats.t.interval(0.95, 2, loc=np.mean(runs), scale=stats.sem(runs))
    # tolerance: the same percentile formula on the same draws; only float summation order differs
    assert (lo, hi) == pytest.approx(ref)
    assert pr.seed_interval([60.0]) is None


def test_probe_claims_from_constructed_result():
    def row(*runs):
        return {"test": {"mean": float(np.mean(runs)), "sd": 0.0, "runs": list(runs)}}

    result = {"rows": {"Right-branching": row(25.0), "Distances + words": row(50.0, 50.5, 51.0),
                       "Random-init Attn + words": row(30.0, 31.0, 30.5), "Attn": row(45.0, 45.5, 46.0),
                       "Attn + words": row(70.0, 70.5, 71.0)}}
    got = {c.id: c.verdict for c in pr.claims(result)}
    assert got == {"probe-attn-over-right-branching": REPRODUCED, "probe-attn-words-best": REPRODUCED,
                   "probe-random-init-fails": REPRODUCED}


# ------------------------------------------------------------------------ beyond the paper: norms


def test_norms_rules_both_sides():
    r = no.SHRINK_RATIO
    assert no.verdict_shrink(r - EPS) == REPRODUCED and no.verdict_shrink(r + EPS) == PARTLY
    assert no.verdict_shrink(1.0 - EPS) == PARTLY and no.verdict_shrink(1.0 + EPS) == NOT_REPRODUCED
    assert no.verdict_shrink(float("nan")) == NOT_REPRODUCED
    n = no.NOOP_RATIO
    assert no.verdict_noop(n - EPS, n - EPS) == REPRODUCED
    assert no.verdict_noop(n + EPS, n - EPS) == PARTLY and no.verdict_noop(n - EPS, n + EPS) == PARTLY
    assert no.verdict_noop(n + EPS, n + EPS) == NOT_REPRODUCED
    relations = 12
    partly = int(relations * no.PARSE_PARTLY)  # 3 of 12
    assert no.verdict_parse(0, relations) == REPRODUCED and no.verdict_parse(1, relations) == PARTLY
    assert no.verdict_parse(partly, relations) == PARTLY and no.verdict_parse(partly + 1, relations) == NOT_REPRODUCED


def _norm_stats(weights_sep: float, norms_sep: float):
    """2 layers x 2 heads: [SEP] gets ``weights_sep`` of the weights and ``norms_sep`` of the norms in layer 2."""
    from helpers.norms.stats import KINDS, NormStats

    w, n = np.zeros((len(KINDS), 2, 2)), np.zeros((len(KINDS), 2, 2))
    sep, other = KINDS.index("sep"), KINDS.index("other")
    w[sep, 1], n[sep, 1] = weights_sep, norms_sep
    w[other], n[other] = 1 - w[sep], 1 - n[sep]
    return NormStats(w, n, np.full((2, 2), 0.5), n_segments=3)


def test_norms_claims_are_claim_records():
    """The chapter's verdicts are the claim model's (no "holds"), decided by the rules above."""
    stats = _norm_stats(0.6, 0.1)  # ratio 1/6 in layer 2: small norms
    grads = {"sep": [1.0, 0.2], "cls": [1.0, 1.0], "punct": [1.0, 1.0], "other": [1.0, 1.0]}
    table1 = [{"relation": r, "change": c, "same_head": c == 0} for r, c in
              (("det", 0.0), ("obj", no.IMPROVE_MARGIN), ("nsubj", 0.5), ("amod", 0.0))]
    got = {c.id: c for c in no.claims(stats, grads, table1)}
    assert list(got) == ["norm-shrink-sep", "norm-shrink-cls", "norm-shrink-punct", "noop-agreement", "norms-parse"]
    assert all(isinstance(c, Claim) and c.verdict in (REPRODUCED, PARTLY, NOT_REPRODUCED) for c in got.values())
    # tolerance: a ratio of constructed floats (relative 1e-6)
    assert got["norm-shrink-sep"].value == pytest.approx(0.1 / 0.6) and got["norm-shrink-sep"].verdict == REPRODUCED
    assert got["norm-shrink-cls"].value is None and got["norm-shrink-cls"].verdict == NOT_REPRODUCED  # no weight: NaN
    assert "[SEP]" in got["noop-agreement"].claim and "layers 2" in got["noop-agreement"].ours
    assert got["noop-agreement"].value == pytest.approx(0.2) and got["noop-agreement"].verdict == REPRODUCED  # as above
    assert got["norms-parse"].value == 1 and got["norms-parse"].verdict == PARTLY  # 1 of 4 relations, at the bar
    assert "obj" in got["norms-parse"].ours
    assert [c.id for c in no.claims(stats)] == ["norm-shrink-sep", "norm-shrink-cls", "norm-shrink-punct"]


# -------------------------------------------------------------------------------- §6 clustering


def test_cluster_rule_both_sides():
    p = cl.LAYER_P
    assert cl.verdict_same_layer(p - EPS, 0.8) == REPRODUCED
    assert cl.verdict_same_layer(p + EPS, 0.8) == PARTLY
    assert cl.verdict_same_layer(p + EPS, 1.0) == NOT_REPRODUCED


# --------------------------------------------------------------------------------------- CLI


def test_claims_command_json(tiny_model_dir, toy_data, tmp_path):
    """``python -m helpers claims`` on the tiny random BERT and toy corpora: every section, one layout."""

    from helpers.cli import main

    data = toy_data
    out = tmp_path / "claims.json"
    rc = main(["claims", "--model", str(tiny_model_dir), "--data-dir", str(data), "--segments", "3", "--seeds", "2",
               "--epochs", "1", "--permutations", "20", "--max-length", "60", "--json", str(out), "--quiet",
               "--cache-dir", str(tmp_path / "c")])
    assert rc == 0
    result = json.loads(out.read_text())
    assert set(result) == {"model", "claims"} and result["model"]
    rows = result["claims"]
    assert all([k for k in r if k != "reason"] == [*FIELDS, *RULE_FIELDS] for r in rows)
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids))
    for wanted in ("prev-token-heads", "sep-attention-middle-layers", "det-head", "coref-head",
                   "probe-attn-words-best", "same-layer-heads-alike"):
        assert wanted in ids
    assert {r["verdict"] for r in rows} <= {REPRODUCED, PARTLY, NOT_REPRODUCED}
    assert all(r["value"] is None or isinstance(r["value"], (int, float)) for r in rows)
