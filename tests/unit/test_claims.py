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
    INCONCLUSIVE,
    NOT_APPLICABLE,
    NOT_REPRODUCED,
    RULE_FIELDS,
    PARTLY,
    REPRODUCED,
    Claim,
    by_id,
    check_row,
    judge_share,
)
from helpers.presentation.book import claims_table
from claim_rows import claim_as
from tests.references import surface_stats

EPS = 1e-6  # a step just across a threshold


# ------------------------------------------------------------------------------- shared rules


def test_claim_layout_and_ids():
    c = claim_as("det-head", "§4.2", PARTLY, float("nan"))
    assert list(c.to_json()) == [*FIELDS, *RULE_FIELDS] and c.value is None  # NaN is stored as "no value"
    with pytest.raises(ValueError, match="comes from a rule"):
        Claim("x", "§3", "c", "p", "o", 1.0, PARTLY)  # a verdict without the rule that gave it
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


def _surface_stats(L=4, H=2, S=20, *, seed=0, causal=False, **values):
    """Constructed §3 statistics of ``S`` segments: every statistic 0 in every segment but those given in
    ``values`` (``{statistic: [segment, layer, head]``, or anything that broadcasts to it), uniform entropy 3."""
    from helpers.surface.stats import CAUSAL_DEFINITIONS, STATISTICS

    per = {k: np.broadcast_to(np.asarray(values.get(k, 0.0), dtype=float), (S, L, H)).copy() for k in STATISTICS}
    undefined = {k: v for k, v in CAUSAL_DEFINITIONS.items()} if causal else {}
    for k in undefined:
        per[k][:] = np.nan
    return surface_stats(per, np.full(S, 3.0), undefined)


def _gradients(L=4, S=20, **kinds):
    """Constructed gradients: each kind's per-segment ``[segment, layer]`` (1 where not given), and their means."""
    per = {k: np.broadcast_to(np.asarray(kinds.get(k, 1.0), dtype=float), (S, L)).copy()
           for k in ("sep", "punct", "cls", "other")}
    return {**{k: v.mean(0).tolist() for k, v in per.items()}, "segments": S, "per_segment": per}


def test_surface_claims_show_the_papers_numbers():
    """The "paper" column is built from helpers.paper: the texts the book and `claims` have always shown."""
    stats = _surface_stats(sep=0.6)  # [SEP] a sink: its rows are judged
    got = {c.id: c for c in su.claims(su.SurfaceReport("toy", {}, stats, _gradients(), None, None), n_boot=50)}
    assert got["prev-token-heads"].paper == "4 (layers 2, 4, 7, 8)"
    assert got["next-token-heads"].paper == "5 (layers 1, 2, 2, 3, 6)"
    assert got["prev-token-heads"].claim == "heads with >50% attention on the previous token"
    assert got["sep-attention-middle-layers"].paper == "layers 6-10 of 12"
    assert got["sep-self-attention"].claim == "at [SEP], heads attend >90% to [SEP]" and got["sep-self-attention"].paper == ">90%"
    assert got["broad-attention-lower-layers"].paper == "layer 1 (Figure 4)"
    assert got["cls-broad-last-layer"].paper == "3.89 nats (128-token segments)"
    assert got["sep-gradient-small"].paper == "very small from layer 5 on"
    assert got["sink-gradient-small"].paper == "very small from layer 5 on, for [SEP]"
    assert got["sink-self-attention"].paper == ">90%, for [SEP]" and "([SEP])" in got["sink-self-attention"].claim


# ---------------------------------------------------------------------------------- §3 surface


def test_surface_rules_both_sides():
    """Each §3 rule on both sides of each of its boundaries: the share of replicates (0.95, 0.05), the ranges of
    the levels (the paper's 90 %, the broad fraction of the uniform entropy) and the gradient ratio's null (1) and
    level (GRADIENT_SMALL, ours)."""
    from helpers.claims import INCONCLUSIVE

    for rule in (lambda x: su.position_heads(x, 0.6), lambda x: su.sep_layers(x, 0.6),
                 lambda x: su.broadest_is_first(x, 1)):
        assert rule(0.95).verdict == REPRODUCED and rule(0.95 - EPS).verdict == INCONCLUSIVE
        assert rule(0.05 + EPS).verdict == INCONCLUSIVE and rule(0.05).verdict == NOT_REPRODUCED
    for rule, low in ((su.self_attended, su.SEP_SELF), (su.cls_broad, su.BROAD_ENTROPY_FRACTION)):
        assert su.SELF_RANGE[1] == su.CLS_BROAD_RANGE[1] == 1.0  # a share, a fraction: at most all of it
        assert rule(low + 0.02, (low, low + 0.04)).verdict == REPRODUCED
        assert rule(low + 0.02, (low - EPS, low + 0.04)).verdict == INCONCLUSIVE
        assert rule(low - 0.02, (low - 0.04, low - EPS)).verdict == NOT_REPRODUCED
        assert rule(1.0, (1.0 - 0.02, 1.0 + EPS)).verdict == INCONCLUSIVE  # out of the range above
        assert rule(low, (low, 1.0)).fields()["range"] == [pytest.approx(low, rel=1e-9), 1.0]  # as reported
    g, null = su.GRADIENT_SMALL, su.GRADIENT_NULL
    assert su.gradient_small(g, (g - 0.1, null - EPS)).verdict == REPRODUCED        # below the null, at the level
    assert su.gradient_small(g + EPS, (g - 0.1, null - EPS)).verdict == PARTLY      # below the null, short of it
    assert su.gradient_small(g + EPS, (g, null)).verdict == INCONCLUSIVE             # holds the null and the level
    assert su.gradient_small(0.8, (g + EPS, null)).verdict == NOT_REPRODUCED          # holds the null, not the level
    assert su.gradient_small(1.2, (1.1, 1.3)).verdict == NOT_REPRODUCED
    assert su.gradient_small(0.4, (0.3, 0.6)).fields() == {
        "rule": "effect", "estimate": 0.4, "interval": [0.3, 0.6], "null": null, "paper_level": g, "range": None,
        "share": None, "parts": None, "part_rows": None, "p_value": None}


def test_surface_share_statistics_on_both_sides_of_their_thresholds():
    """The discrete statements on constructed segments: a head (a layer) exactly at the threshold is not above
    it in any replicate, one a step above is in every replicate; the broadest layer is layer 1 or not."""
    from helpers.surface.stats import (SPECIALIST_THRESHOLD, SegmentReplicates, share_broadest_layer,
                                       share_some_head_above, share_some_layer_above)

    t = SPECIALIST_THRESHOLD
    at, above = (SegmentReplicates(_surface_stats(prev=v, sep=v), n_boot=50) for v in (t, t + EPS))
    assert share_some_head_above(at, "prev") == 0.0 and share_some_head_above(above, "prev") == 1.0
    assert share_some_layer_above(at, "sep", su.SEP_MAJORITY) == 0.0
    assert share_some_layer_above(above, "sep", su.SEP_MAJORITY) == 1.0
    entropy = np.zeros((20, 4, 2))
    entropy[:, 0] = 2.0
    assert share_broadest_layer(SegmentReplicates(_surface_stats(entropy=entropy), n_boot=50)) == 1.0
    entropy[:, 1] = 2.0 + EPS
    assert share_broadest_layer(SegmentReplicates(_surface_stats(entropy=entropy), n_boot=50)) == 0.0


def test_surface_claims_from_constructed_stats_follow_their_fields():
    """Ids, order, values and verdicts on constructed segments; every row's verdict follows from its fields."""
    from helpers.claims import INCONCLUSIVE, NOT_APPLICABLE, check_row

    rng = np.random.default_rng(0)
    S = 40
    prev = np.zeros((S, 4, 2))
    prev[:, 1, 1] = np.where(np.arange(S) < S // 2, 0.9, 0.1) + rng.normal(0, 0.01, S)  # mean ~0.5: undecided
    nxt = np.zeros((S, 4, 2))
    nxt[:, 0, 0] = 0.8                                                  # a next-token head in every segment
    cls = np.zeros((S, 4, 2))
    cls[:, 1:3] = 0.4                                                   # [CLS] the sink of layers 2 and 3
    cls_cls = np.zeros((S, 4, 2))
    cls_cls[:, 1:3] = 0.95
    entropy = np.ones((S, 4, 2))
    entropy[:, 1] = 2.0                                                 # layer 2 the broadest
    entropy_cls = np.zeros((S, 4, 2))
    entropy_cls[:, -1] = 2.9                                            # of log n = 3: broad
    stats = _surface_stats(S=S, prev=prev, next=nxt, cls=cls, cls_cls=cls_cls, sep=0.02, sep_sep=0.1,
                           entropy=entropy, entropy_cls=entropy_cls)
    cls_g = np.ones((S, 4))
    cls_g[:, 1:3] = 0.1 + rng.uniform(0, 0.02, (S, 2))                 # small where [CLS] is a sink
    grads = _gradients(S=S, cls=cls_g, sep=0.7)
    rows = su.claims(su.SurfaceReport("toy", {}, stats, grads, None, None), n_boot=200)
    got = {c.id: c for c in rows}
    assert list(got) == ["prev-token-heads", "next-token-heads", "sep-attention-middle-layers", "sep-self-attention",
                         "sink-self-attention", "broad-attention-lower-layers", "cls-broad-last-layer",
                         "sep-gradient-small", "sink-gradient-small"]
    for c in rows:
        check_row(c.to_json())
        assert c.verdict == NOT_APPLICABLE or (c.resampled == "segments" and c.n == S)
    assert got["prev-token-heads"].verdict == INCONCLUSIVE and 0.05 < got["prev-token-heads"].judged.share < 0.95
    assert got["next-token-heads"].verdict == REPRODUCED and got["next-token-heads"].value == 1
    assert got["sep-attention-middle-layers"].verdict == NOT_REPRODUCED
    # tolerance: a mean of equal constructed floats (relative 1e-12)
    assert got["sep-attention-middle-layers"].value == pytest.approx(0.02, rel=1e-12)
    # [SEP] is no sink here: its role claims are not applicable, with the measured share, their statistic kept
    for cid in ("sep-self-attention", "sep-gradient-small"):
        assert got[cid].verdict == NOT_APPLICABLE and "takes at most 0.02" in got[cid].reason
    assert got["sep-self-attention"].value == pytest.approx(0.1, rel=1e-12)  # as above
    assert got["sep-gradient-small"].value == pytest.approx(0.7, rel=1e-12)  # as above
    # ... and judged on [CLS], the measured sink
    assert "([CLS])" in got["sink-self-attention"].claim and got["sink-self-attention"].verdict == REPRODUCED
    assert got["sink-self-attention"].value == pytest.approx(0.95, rel=1e-12)  # as above
    sink = got["sink-gradient-small"]
    assert "([CLS])" in sink.claim and sink.verdict == REPRODUCED and sink.judged.interval[1] < su.GRADIENT_SMALL
    assert "layers 2, 3" in sink.ours
    assert got["broad-attention-lower-layers"].verdict == NOT_REPRODUCED and got["broad-attention-lower-layers"].value == 2
    assert got["cls-broad-last-layer"].verdict == REPRODUCED
    assert got["cls-broad-last-layer"].judged.estimate == pytest.approx(2.9 / 3.0, rel=1e-9)  # as above
    # the surface command's JSON "claims" keeps its claim/paper/ours/verdict keys (and adds id, section, value)
    assert {"claim", "paper", "ours", "verdict"} <= set(rows[0].to_json()) and rows[0].id == "prev-token-heads"


def test_surface_sink_premise_both_ways():
    """A model whose [SEP] is a sink has its [SEP] claims judged on [SEP], and its measured sink is [SEP]; one
    without any sink has every claim about a sink's role not applicable; no gradients: no gradient rows."""
    from helpers.claims import NOT_APPLICABLE
    from helpers.surface.stats import SINK_SHARE

    sep = np.zeros((20, 4, 2))
    sep[:, 2] = SINK_SHARE + 0.05
    stats = _surface_stats(sep=sep, sep_sep=0.97, cls=0.1)
    got = {c.id: c for c in su.claims(su.SurfaceReport("toy", {}, stats, _gradients(sep=0.2), None, None), n_boot=100)}
    for cid in ("sep-self-attention", "sink-self-attention", "sep-gradient-small", "sink-gradient-small"):
        assert got[cid].verdict == REPRODUCED, cid
    assert "([SEP])" in got["sink-self-attention"].claim
    assert "upper layers" in got["sep-gradient-small"].ours and "layers 3:" in got["sink-gradient-small"].ours
    at = sep.copy()
    at[:, 2] = SINK_SHARE  # at the threshold: not a sink
    none = _surface_stats(sep=at, sep_sep=0.97, cls=0.1)
    got = {c.id: c for c in su.claims(su.SurfaceReport("toy", {}, none, _gradients(sep=0.2), None, None), n_boot=100)}
    for cid in ("sep-self-attention", "sink-self-attention", "sep-gradient-small", "sink-gradient-small"):
        assert got[cid].verdict == NOT_APPLICABLE and "is not a sink of this model" in got[cid].reason, cid
    assert got["sep-attention-middle-layers"].verdict == NOT_REPRODUCED  # an observation: judged on [SEP] anyway
    rows = [c.id for c in su.claims(su.SurfaceReport("toy", {}, none, None, None, None), n_boot=20)]
    assert "sep-gradient-small" not in rows and "sink-gradient-small" not in rows  # no gradients, no claim


def test_surface_undefined_gradient_ratio_is_not_applicable():
    """No NaN becomes a verdict: a ratio whose denominator is 0 (no gradient for other tokens) is not applicable."""
    from helpers.claims import NOT_APPLICABLE

    stats = _surface_stats(cls=0.4)
    grads = _gradients(cls=0.1, other=0.0)
    got = {c.id: c for c in su.claims(su.SurfaceReport("toy", {}, stats, grads, None, None), n_boot=20)}
    assert got["sink-gradient-small"].verdict == NOT_APPLICABLE and "undefined" in got["sink-gradient-small"].reason
    with pytest.raises(ValueError, match="per_segment"):  # intervals need each segment's values
        su.claims(su.SurfaceReport("toy", {}, stats, {k: v for k, v in grads.items() if k != "per_segment"},
                                   None, None), n_boot=20)


# ----------------------------------------------------------------------------------- §4.2 syntax


def test_syntax_single_head_rule_both_sides():
    top = sy.SPECIALISED_MARGIN  # "not much better": a gain in [LOWEST_GAIN, SPECIALISED_MARGIN]
    assert sy.judge_single_head_all(8.0, (6.0, top)).verdict == REPRODUCED
    assert sy.judge_single_head_all(8.0, (6.0, top + EPS)).verdict == INCONCLUSIVE
    assert sy.judge_single_head_all(20.0, (top + EPS, 25.0)).verdict == NOT_REPRODUCED
    assert sy.judge_single_head_all(20.0, (top, 25.0)).verdict == INCONCLUSIVE
    assert sy.judge_single_head_all(-3.0, (-6.0, -1.0)).verdict == REPRODUCED  # worse than the baseline: no head does well
    row = sy.judge_single_head_all(8.0, (6.0, 10.0)).fields()
    assert row["rule"] == "within" and row["range"] == [sy.LOWEST_GAIN, top] and row["interval"] == [6.0, 10.0]


def test_syntax_relation_rule_both_sides():
    m, acc = sy.SPECIALISED_MARGIN, sy.SPECIALISED_ACCURACY
    assert acc == paper.SPECIALISED_ACCURACY.value == 75  # the paper's ">75% accuracy"
    high = (acc + 5, acc + 15)  # an accuracy interval inside [75, 100]

    def v(gain, gain_ci, acc_ci=high):
        return sy.judge_relation_head((acc_ci[0] + acc_ci[1]) / 2, acc_ci, gain, gain_ci)

    # the gain (an effect, null 0, our level SPECIALISED_MARGIN), accuracy clear above 75
    assert v(m, (EPS, 2 * m)).verdict == REPRODUCED
    assert v(m - EPS, (EPS, 2 * m)).verdict == PARTLY
    assert v(m, (0.0, 2 * m)).verdict == INCONCLUSIVE            # the interval holds the null; it reaches the level
    assert v(5.0, (-1.0, m - EPS)).verdict == NOT_REPRODUCED     # ... and cannot reach the level
    # the accuracy (within [75, 100]) with a clear gain
    assert v(2 * m, (m + 1, 3 * m), (acc, acc + 10)).verdict == REPRODUCED
    assert v(2 * m, (m + 1, 3 * m), (acc - EPS, acc + 10)).verdict == INCONCLUSIVE
    assert v(2 * m, (m + 1, 3 * m), (acc - 10, acc - EPS)).verdict == NOT_REPRODUCED
    # a specialised gain short of our level at a high accuracy: partly; any part not reproduced: not reproduced
    assert v(m - 5, (2.0, m), (acc + 10, acc + 20)).verdict == PARTLY
    assert v(m - 5, (2.0, m), (acc - 10, acc - EPS)).verdict == NOT_REPRODUCED
    judged = v(m, (EPS, 2 * m))
    assert judged.rule == "combined" and [p.name for p in judged.parts] == ["gain over the offset baseline",
                                                                            "accuracy above 75%"]


def test_syntax_statements_both_sides():
    m = sy.SPECIALISED_MARGIN
    # four relations: at least half (SPECIALISED_SHARE) must gain at least the margin; a NaN gain never does
    gains = np.array([[m, m, m - EPS, np.nan], [m, m - EPS, m - EPS, np.nan], [np.nan, np.nan, m, m + 1]])
    assert sy.SPECIALISED_SHARE == 0.5 and sy.specialised_holds(gains).tolist() == [True, False, True]
    n = 5  # all but at most DIRECTION_EXCEPTIONS of five relations go dependent-to-head
    k = n - sy.DIRECTION_EXCEPTIONS
    rows = np.array([[True] * k + [False] * (n - k), [True] * (k - 1) + [False] * (n - k + 1)])
    assert sy.direction_holds(rows).tolist() == [True, False]
    assert judge_share(0.95) == REPRODUCED and judge_share(0.95 - EPS) == INCONCLUSIVE  # the rule they feed


def test_syntax_claims_on_toy_treebank(tiny_lm, toy_conllu):
    from helpers.syntax.stats import ALL, DIRECTIONS

    run = run_heads(tiny_lm, str(toy_conllu), max_length=60)
    relations = table1_relations(run.scores)
    held = sy.held_out(run, run, n_boot=50)
    statements = sy.statement_shares(run.scores, run.scores, relations, held, n_boot=50)
    got = sy.claims(relations, held, statements)
    ids = [c.id for c in got]
    assert ids == ["single-head-parsing-all", "det-head", "obj-head", "poss-head", "auxpass-head", "prt-head",
                   "specialised-heads", "dependent-attends-to-head"]
    assert all("nan" not in c.ours.lower() for c in got)
    for c in got:
        check_row(c.to_json())
    rows = {r["relation"]: r for r in held}
    # Each verdict from its rule on the held-out rows (dev is test here) and the statements' shares.
    want = {"single-head-parsing-all": sy.judge_single_head_all(rows[ALL]["gain"], rows[ALL]["gain_ci"]).verdict,
            "specialised-heads": judge_share(statements["specialised"]),
            "dependent-attends-to-head": judge_share(statements["direction"])}
    for rel, claim_id in sy.CLAIM_RELATIONS.items():
        r = rows.get(rel)
        want[claim_id] = NOT_APPLICABLE if r is None else sy.judge_relation_head(
            r["held_out_accuracy"], r["held_out_ci"], r["gain"], r["gain_ci"]).verdict
    assert {c.id: c.verdict for c in got} == want
    assert NOT_APPLICABLE in want.values()  # the toy has no aux:pass: no verdict on it, with its reason
    assert by_id(got)["auxpass-head"].reason == "no aux:pass word evaluated on both GUM dev and GUM test"
    # the values are the statistics they always were: the held-out accuracy, and counts of relations
    table = run.scores.table()
    listed = [r for r in relations if r != ALL]
    assert by_id(got)["single-head-parsing-all"].value == rows[ALL]["held_out_accuracy"]
    assert by_id(got)["specialised-heads"].value == sum(
        rows[r]["held_out_accuracy"] - rows[r]["baseline_accuracy"] >= sy.SPECIALISED_MARGIN for r in listed)
    assert by_id(got)["dependent-attends-to-head"].value == sum(table[r]["direction"] == DIRECTIONS[0] for r in listed)
    # no relation evaluated: the two statements are not applicable, never a verdict
    none = sy.claims([ALL], held, {"relations": [], "specialised": None, "specialised_sentences": 0,
                                   "direction": None, "direction_sentences": 0})
    assert {c.verdict for c in none if c.id in ("specialised-heads", "dependent-attends-to-head")} == {NOT_APPLICABLE}
    # an undefined (NaN) interval is never a verdict either: not applicable, with its reason
    nan = [{**r, "gain_ci": (float("nan"), float("nan"))} if r["relation"] in (ALL, "det") else r for r in held]
    undefined = by_id(sy.claims(relations, nan, statements))
    for claim_id in ("single-head-parsing-all", "det-head"):
        assert undefined[claim_id].verdict == NOT_APPLICABLE and "undefined" in undefined[claim_id].reason
        check_row(undefined[claim_id].to_json())


# ------------------------------------------------------------------------------------ §4.3 coref


def test_coref_rule_both_sides():
    m, close = co.COREF_MARGIN, co.COREF_CLOSE
    assert m == paper.COREF_OVER_HEAD_MATCH.value == 10  # the paper's "over 10 accuracy points"
    near = (-close, 3.0)  # a difference from the rule-based system inside [-COREF_CLOSE, HIGHEST_GAIN]

    def v(hm_gain, hm_ci, rb_ci=near):
        return co.judge_coref_head(hm_gain, hm_ci, (rb_ci[0] + rb_ci[1]) / 2, rb_ci).verdict

    assert v(m, (EPS, 20.0)) == REPRODUCED
    assert v(m - EPS, (EPS, 20.0)) == PARTLY
    assert v(m, (0.0, 20.0)) == INCONCLUSIVE
    assert v(5.0, (-1.0, m - EPS)) == NOT_REPRODUCED
    assert v(15.0, (12.0, 18.0), (-close - EPS, 2.0)) == INCONCLUSIVE     # may lie more than 5 points below
    assert v(15.0, (12.0, 18.0), (-12.0, -close - EPS)) == NOT_REPRODUCED  # lies more than 5 points below
    assert v(15.0, (12.0, 18.0), (4.0, 9.0)) == REPRODUCED                 # above the rule-based system: closer still
    assert v(m - 2, (2.0, 14.0), (-12.0, -close - EPS)) == NOT_REPRODUCED
    assert v(m - 2, (2.0, 14.0)) == PARTLY


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
    assert "2-1" in claim.ours and claim.verdict == REPRODUCED  # +40 over head match, +20 over the rule-based system
    row = claim.to_json()
    check_row(row)
    assert row["rule"] == "combined" and row["resampled"] == "documents" and row["n"] == n // 4
    assert [p["estimate"] for p in row["part_rows"]] == pytest.approx([40.0, 20.0])
    # no mention with an antecedent: not applicable, with its reason
    empty = co.CorefRun("test", "windows", np.zeros((2, 2, 0), bool), np.zeros((3, 0), bool), np.array([]),
                        np.array([], int), 0, [])
    (claim,) = co.claims(empty, empty)
    assert claim.verdict == NOT_APPLICABLE and "no mention" in claim.reason


# ----------------------------------------------------------------------------------- §5 probes


def test_probe_rules_both_sides():
    g = pr.PROBE_GAIN
    assert pr.judge_gain(g, (EPS, 2 * g)).verdict == REPRODUCED
    assert pr.judge_gain(g - EPS, (EPS, 2 * g)).verdict == PARTLY
    assert pr.judge_gain(g, (0.0, 2 * g)).verdict == INCONCLUSIVE
    assert pr.judge_gain(3.0, (-1.0, g - EPS)).verdict == NOT_REPRODUCED
    # attention-and-words must beat both attention-only and distances-and-words
    assert pr.judge_attn_words_best(2 * g, (g, 3 * g), g, (EPS, 2 * g)).verdict == REPRODUCED
    assert pr.judge_attn_words_best(2 * g, (g, 3 * g), g - EPS, (EPS, 2 * g)).verdict == PARTLY
    assert pr.judge_attn_words_best(2 * g, (g, 3 * g), 2.0, (0.0, g)).verdict == INCONCLUSIVE
    assert pr.judge_attn_words_best(2 * g, (g, 3 * g), 2.0, (-1.0, g - EPS)).verdict == NOT_REPRODUCED


def probe_result(uas: dict[str, list[float]], n_sentences: int = 60, words: int = 10, seed: int = 0) -> dict:
    """A constructed :func:`run_probes` result: each probe right on about its UAS of the ``words`` of each of
    ``n_sentences`` test sentences, with each seed; ``rows`` and ``per_sentence`` as the run writes them."""
    rng = np.random.default_rng(seed)
    totals = [words] * n_sentences
    correct, rows = {}, {}
    for name, values in uas.items():
        runs = [rng.binomial(words, u / 100, size=n_sentences).tolist() for u in values]
        correct[name] = {"test": runs}
        means = [round(100 * sum(r) / max(sum(totals), 1), 2) for r in runs]  # (as the run: no word, 0)
        rows[name] = {"test": {"mean": float(np.mean(means)), "sd": 0.0, "runs": means}}
    return {"rows": rows, "per_sentence": {"totals": {"test": totals}, "correct": correct}}


def test_probe_claims_from_constructed_result():
    result = probe_result({"Right-branching": [25.0], "Distances + words": [50.0, 50.5, 51.0],
                           "Random-init Attn + words": [30.0, 31.0, 30.5], "Attn": [45.0, 45.5, 46.0],
                           "Attn + words": [70.0, 70.5, 71.0]}, n_sentences=300)
    got = pr.claims(result)
    assert {c.id: c.verdict for c in got} == {"probe-attn-over-right-branching": REPRODUCED,
                                              "probe-attn-words-best": REPRODUCED, "probe-random-init-fails": REPRODUCED}
    for c in got:
        check_row(c.to_json())
        assert c.resampled == "sentences" and c.n == 300
    rows = result["rows"]
    # the values: the mean over seeds of each probe's UAS, as before
    assert by_id(got)["probe-attn-words-best"].value == pytest.approx(np.mean(rows["Attn + words"]["test"]["runs"]))
    assert by_id(got)["probe-random-init-fails"].value == pytest.approx(
        np.mean(rows["Random-init Attn + words"]["test"]["runs"]))
    best = by_id(got)["probe-attn-words-best"].to_json()
    assert best["rule"] == "combined" and best["parts"] == [REPRODUCED, REPRODUCED]
    # a close distances-and-words probe: attention-and-words beats it by less than PROBE_GAIN, not "best" outright
    close = probe_result({"Right-branching": [25.0], "Distances + words": [66.0, 66.0, 66.0],
                          "Random-init Attn + words": [30.0, 31.0, 30.5], "Attn": [45.0, 45.5, 46.0],
                          "Attn + words": [70.0, 70.5, 71.0]}, n_sentences=300)
    assert by_id(pr.claims(close))["probe-attn-words-best"].verdict in (PARTLY, INCONCLUSIVE, NOT_REPRODUCED)
    # a result without per-sentence counts: nothing to resample, not applicable
    bare = {"rows": result["rows"]}
    assert {c.verdict for c in pr.claims(bare)} == {NOT_APPLICABLE}
    # no counted word on the test set (every word punctuation): NaN replicates, not applicable, never a verdict
    empty = probe_result({name: [0.0] * len(r["test"]["runs"]) for name, r in result["rows"].items()}, words=0)
    assert {c.verdict for c in pr.claims(empty)} == {NOT_APPLICABLE}
    assert all("undefined" in c.reason for c in pr.claims(empty))


# ------------------------------------------------------------------------ beyond the paper: norms


def test_norms_shrink_rule_both_sides():
    """An effect on the norm/weight share ratio: null 1 (norms follow weights), level SHRINK_RATIO; a ratio whose
    interval holds 1 is never "partly"."""
    from helpers.claims import INCONCLUSIVE, Undefined

    r = no.SHRINK_RATIO
    v = lambda ratio, lo, hi: no.judge_shrink(ratio, (lo, hi)).verdict  # noqa: E731
    assert v(r, r - 0.1, 1 - EPS) == REPRODUCED and v(r + EPS, r - 0.1, 1 - EPS) == PARTLY  # below 1: the level decides
    assert v(0.9, 0.8, 1 - EPS) == PARTLY and v(0.9, 0.8, 1.0) != PARTLY  # the interval's top reaching 1 holds the null
    assert v(0.99, 0.95, 1.03) == NOT_REPRODUCED  # the interval holds 1 and cannot reach the level
    assert v(0.9, r, 1.2) == INCONCLUSIVE and v(0.9, r + EPS, 1.2) == NOT_REPRODUCED  # holds both, or only the null
    with pytest.raises(Undefined):
        no.judge_shrink(float("nan"), (0.1, 0.2))
    with pytest.raises(Undefined):
        no.judge_shrink(0.3, (float("nan"), 0.2))


def test_norms_noop_rule_both_sides():
    """Two effects (gradient ratio, norm/weight ratio), each null 1 and level NOOP_RATIO, combined."""
    from helpers.claims import INCONCLUSIVE

    n = no.NOOP_RATIO
    ok, above, holds_null = (n, (n - 0.1, n + 0.1)), (n + EPS, (n - 0.1, 0.9)), (0.8, (n - 0.1, 1.1))
    v = lambda g, r: no.judge_noop(g[0], g[1], r[0], r[1]).verdict  # noqa: E731
    assert v(ok, ok) == REPRODUCED and v(ok, above) == PARTLY and v(above, ok) == PARTLY
    assert v(ok, holds_null) == INCONCLUSIVE and v(holds_null, above) == INCONCLUSIVE
    assert v(ok, (0.9, (n + EPS, 1.1))) == NOT_REPRODUCED  # one part holds the null and cannot reach the level
    judged = no.judge_noop(*ok, *above)
    assert [p.name for p in judged.parts] == ["gradient ratio", "norm/weight share ratio"]


def test_norms_parse_rule_both_sides():
    """Each relation's paired change within [CHANGE_FLOOR, IMPROVE_MARGIN], combined: holds when every interval lies
    at or below the margin, fails when one lies wholly above it, else inconclusive."""
    from helpers.claims import INCONCLUSIVE, Undefined

    m = no.IMPROVE_MARGIN
    same = ("det", 0.0, (0.0, 0.0))  # the same head, the same predictions: no change at all
    v = lambda *rows: no.judge_parse(rows).verdict  # noqa: E731
    assert v(same, ("obj", 0.5, (-1.0, m))) == REPRODUCED
    assert v(same, ("obj", 0.5, (-1.0, m + EPS))) == INCONCLUSIVE
    assert v(same, ("obj", 2.0, (m, 3.0))) == INCONCLUSIVE
    assert v(same, ("obj", 2.0, (m + EPS, 3.0)), ("amod", 0.5, (-1.0, 2.0))) == NOT_REPRODUCED  # one relation is better
    assert v(("x", -50.0, (no.CHANGE_FLOOR, -20.0))) == REPRODUCED  # much worse is no better
    with pytest.raises(Undefined):
        no.judge_parse([same, ("obj", 0.5, None)])


def test_norms_parse_groups_both_sides():
    """Relations by where their interval lies against the margin: the chapter's lists and the rule's parts agree."""
    m = no.IMPROVE_MARGIN
    rows = [{"relation": r, "change": 0.0, "change_interval": iv} for r, iv in
            (("a", [m + EPS, 3.0]), ("b", [m, 3.0]), ("c", [-1.0, m]), ("d", [-1.0, m + EPS]))]
    assert no.parse_groups(rows) == {"better": ["a"], "within": ["c"], "undecided": ["b", "d"]}
    parts = no.judge_parse([(r["relation"], r["change"], r["change_interval"]) for r in rows]).parts
    assert [p.verdict for p in parts] == [NOT_REPRODUCED, "inconclusive", REPRODUCED, "inconclusive"]
    assert no.parse_groups([{"relation": "x", "change": 1.0}]) == {"better": [], "within": [], "undecided": []}


def test_norms_premises_both_ways():
    """[SEP] and [CLS]: a sink (more than SINK_SHARE of some layer); "." and ",": some layer at least
    PUNCT_CONCENTRATION times what uniform attention gives them; else the reason, with the measured share."""
    from helpers.surface.stats import SINK_SHARE

    assert no.shrink_premise(_norm_stats(SINK_SHARE + EPS, 0.1), "sep") is None
    reason = no.shrink_premise(_norm_stats(SINK_SHARE, 0.1), "sep")
    assert "[SEP] is not a sink" in reason and f"{SINK_SHARE:.2f}" in reason
    u = 0.1
    assert no.punct_premise(np.array([0.05, no.PUNCT_CONCENTRATION * u]), u) is None
    reason = no.punct_premise(np.array([0.05, no.PUNCT_CONCENTRATION * u - EPS]), u)
    assert "no large weights" in reason and "0.20" in reason and "0.10" in reason
    assert "no per-segment" in no.punct_premise(np.array([0.5]), float("nan"))


def _norm_stats(weights_sep: float, norms_sep: float, *, spread: float = 0.0, segments: int = 8, punct: float = 0.1):
    """2 layers x 2 heads over ``segments`` segments: [SEP] gets ``weights_sep`` of the weights and ``norms_sep`` of
    the norms in layer 2 (each segment within ``spread`` of them, in turn above and below), "." and "," get
    ``punct`` of the weights and norms in layer 1 against 0.1 under uniform attention; the rest goes to other
    tokens. Per-segment values kept, so the claims have intervals."""
    from helpers.norms.stats import KINDS, NormSegments, NormStats

    sep, other, punct_k = KINDS.index("sep"), KINDS.index("other"), KINDS.index("punct")
    w, n = np.zeros((segments, len(KINDS), 2, 2)), np.zeros((segments, len(KINDS), 2, 2))
    sign = np.where(np.arange(segments) % 2 == 0, 1.0, -1.0)[:, None]
    w[:, sep, 1], n[:, sep, 1] = weights_sep + spread * sign, norms_sep + spread * sign
    w[:, punct_k, 0], n[:, punct_k, 0] = punct, punct
    w[:, other], n[:, other] = 1 - w[:, sep] - w[:, punct_k], 1 - n[:, sep] - n[:, punct_k]
    uniform = np.zeros((segments, len(KINDS)))
    uniform[:, punct_k], uniform[:, other] = 0.1, 0.9
    seg = NormSegments(np.arange(segments), w.astype(np.float32), n.astype(np.float32), uniform.astype(np.float32))
    return NormStats(w.mean(0), n.mean(0), np.full((2, 2), 0.5), n_segments=segments, segments=seg)


def test_norms_claims_are_claim_records():
    """The chapter's verdicts are the convention's, decided by the rules above, every row checked; premises that
    fail and undefined numbers make rows not applicable, with their reasons."""
    from helpers.claims import INCONCLUSIVE, NOT_APPLICABLE, check_row

    stats = _norm_stats(0.6, 0.1, spread=0.05)  # ratio 1/6 in layer 2: small norms
    grads = {"sep": [1.0, 0.2], "cls": [1.0, 1.0], "punct": [1.0, 1.0], "other": [1.0, 1.0],
             "per_segment": {"sep": np.array([[1.0, 0.1], [1.0, 0.3]] * 4), "other": np.ones((8, 2))}}
    table1 = [{"relation": r, "change": c, "same_head": c == 0, "change_interval": iv, "sentences": 30} for r, c, iv in
              (("det", 0.0, [0.0, 0.0]), ("obj", no.IMPROVE_MARGIN, [-0.5, 2.5]), ("nsubj", 0.5, [-0.5, 0.9]))]
    got = {c.id: c for c in no.claims(stats, grads, table1)}
    assert list(got) == ["norm-shrink-sep", "norm-shrink-cls", "norm-shrink-punct", "noop-agreement", "norms-parse"]
    for c in got.values():
        check_row(c.to_json())
    # tolerance: a ratio of constructed floats (relative 1e-6)
    sep = got["norm-shrink-sep"]
    assert sep.value == pytest.approx(0.1 / 0.6) and sep.verdict == REPRODUCED and "[0.1" in sep.ours
    assert (sep.resampled, sep.n) == ("segments", 8) and sep.to_json()["null"] == 1.0
    assert got["norm-shrink-cls"].verdict == NOT_APPLICABLE and "takes at most 0.00" in got["norm-shrink-cls"].reason
    punct = got["norm-shrink-punct"]  # 0.1 in layer 1 against 0.1 under uniform attention: no large weights
    assert punct.verdict == NOT_APPLICABLE and "0.10 under uniform" in punct.reason
    noop = got["noop-agreement"]
    assert "[SEP]" in noop.claim and "layers 2" in noop.ours and noop.to_json()["rule"] == "combined"
    assert noop.value == pytest.approx(0.2) and noop.verdict == REPRODUCED  # as above
    parse = got["norms-parse"]
    assert parse.value == 1 and parse.verdict == INCONCLUSIVE and parse.to_json()["parts"] == [
        REPRODUCED, INCONCLUSIVE, REPRODUCED]  # obj's interval reaches above the margin
    assert (parse.resampled, parse.n) == ("sentences", 30) and "obj" in parse.ours
    assert [c.id for c in no.claims(stats)] == ["norm-shrink-sep", "norm-shrink-cls", "norm-shrink-punct"]
    # punctuation with large weights (twice uniform attention's) is judged
    assert no.claims(_norm_stats(0.6, 0.1, punct=0.25))[2].verdict != NOT_APPLICABLE


def test_norms_claims_not_applicable_with_reasons():
    """No sink, no per-segment gradients, no per-segment shares, a NaN: never a verdict, always a reason."""
    from helpers.claims import NOT_APPLICABLE, check_row
    from helpers.surface.stats import SINK_SHARE

    means = {"sep": [1.0, 0.2], "cls": [1.0, 1.0], "punct": [1.0, 1.0], "other": [1.0, 1.0]}
    rows = {c.id: c for c in no.claims(_norm_stats(0.6, 0.1, spread=0.05), means)}
    assert rows["noop-agreement"].verdict == NOT_APPLICABLE and "no per-segment gradients" in rows["noop-agreement"].reason
    weak = {c.id: c for c in no.claims(_norm_stats(SINK_SHARE, 0.1), {**means, "per_segment": {"sep": np.ones((8, 2)),
                                                                                               "other": np.ones((8, 2))}})}
    assert weak["noop-agreement"].verdict == NOT_APPLICABLE and "no sink to test" in weak["noop-agreement"].reason
    assert f"{SINK_SHARE:.2f}" in weak["noop-agreement"].reason and weak["norm-shrink-sep"].verdict == NOT_APPLICABLE
    bare = _norm_stats(0.6, 0.1)
    bare.segments = None  # read from a cache without its segments
    row = no.claims(bare)[0]
    assert row.verdict == NOT_APPLICABLE and "no per-segment" in row.reason
    nan = _norm_stats(0.6, 0.1)
    nan.segments.norms[:] = np.nan  # every replicate undefined: the interval is NaN
    row = no.claims(nan)[0]
    assert row.verdict == NOT_APPLICABLE and "undefined" in row.reason
    for r in [*rows.values(), *weak.values(), row]:
        check_row(r.to_json())


# -------------------------------------------------------------------------------- §6 clustering


def test_cluster_rule_both_sides():
    level, p = cl.SAME_LAYER_RATIO, cl.LAYER_P
    assert cl.judge_same_layer(level, (level - 0.1, level + 0.05), p - EPS).verdict == REPRODUCED
    assert cl.judge_same_layer(level + EPS, (level - 0.1, level + 0.05), p - EPS).verdict == PARTLY
    # p at or above 0.05: a ratio below 1 is no longer "partly"
    assert cl.judge_same_layer(0.8, (0.7, 1.1), p).verdict == INCONCLUSIVE
    assert cl.judge_same_layer(0.97, (level, 1.05), p).verdict == INCONCLUSIVE       # lo reaches our level exactly
    assert cl.judge_same_layer(0.97, (level + EPS, 1.05), p).verdict == NOT_REPRODUCED
    assert cl.judge_same_layer(0.97, (level + EPS, 1.05), 0.2).verdict == NOT_REPRODUCED
    row = cl.judge_same_layer(0.8, (0.7, 0.9), 0.01).fields()
    assert row["null"] == cl.NO_LAYER_EFFECT == 1.0 and row["p_value"] == 0.01


def test_cluster_claim_from_a_result():
    from types import SimpleNamespace

    sim = {"ratio": 0.8, "p_value": 0.001, "ratio_interval": [0.75, 0.85], "segments_resampled": 40}
    (c,) = cl.claims(SimpleNamespace(similarity=sim))
    check_row(c.to_json())
    assert (c.verdict, c.value, c.resampled, c.n) == (REPRODUCED, 0.8, "segments", 40)
    sim = {**sim, "ratio_interval": [float("nan"), float("nan")]}  # an undefined interval: not applicable
    (c,) = cl.claims(SimpleNamespace(similarity=sim))
    assert c.verdict == NOT_APPLICABLE and "undefined" in c.reason


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
    from helpers.claims import NOT_APPLICABLE, VERDICTS, check_row

    assert {r["verdict"] for r in rows} <= {*VERDICTS, NOT_APPLICABLE}
    for r in rows:  # every row's verdict follows from its own fields
        if r["rule"] is not None:
            check_row(r)
    assert all(r["value"] is None or isinstance(r["value"], (int, float)) for r in rows)


def test_the_probe_chapters_glued_gains_are_the_claims_gains():
    """Chapter 5 glues each probe's pooled UAS and each paired gain as ``estimate [lo, hi]`` (signed for a gain), the
    numbers of :func:`helpers.probe.claims.gain` for the same probes."""
    from helpers.presentation.chapters import PROBE_GAINS, probe_gain_texts

    result = probe_result({"Right-branching": [25.0], "Distances + words": [50.0, 50.5, 51.0],
                           "Random-init Attn + words": [30.0, 31.0, 30.5], "Attn": [45.0, 45.5, 46.0],
                           "Attn + words": [60.0, 61.0, 60.5]})
    texts = probe_gain_texts(result)
    assert list(texts) == [name for name, *_ in PROBE_GAINS]
    for name, probe, baseline in PROBE_GAINS:
        g = pr.gain(result, probe, baseline)
        lo, hi = g["interval"]
        want = (f"{g['estimate']:+.1f} [{lo:+.1f}, {hi:+.1f}]" if baseline else f"{g['estimate']:.1f} [{lo:.1f}, {hi:.1f}]")
        assert texts[name] == want
    assert texts["aw_over_attn"].startswith("+") and not texts["attn_ci"].startswith("+")
