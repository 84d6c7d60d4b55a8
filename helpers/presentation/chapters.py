"""What the chapters show beside their figures: each table and paragraph a chapter builds from its section's
results (chapter 02, which has no section, from the arrays its cells compute), so that a chapter cell calls one
function here and shows what it returns.

Nothing here computes a statistic: every number comes from a section's report (or the result its record's
run returns, or a chapter 02 cell), and is only rounded, formatted and labelled here. Tables are pandas DataFrames for
:func:`helpers.presentation.book.table`; text is for :func:`helpers.presentation.book.glue_text`.

>>> table(example_heads(report.figure1.heads), name="tbl-surface-example-heads", caption="...")  # doctest: +SKIP
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from helpers import paper
from helpers.cluster.run import NO_BEHAVIOUR
from helpers.cluster.stats import layer_distances
from helpers.core.encoding import check_words
from helpers.core.labels import head_label
from helpers.coref.run import table2
from helpers.coref.stats import MENTION_TYPES
from helpers.probe.run import CONFIGS
from helpers.syntax.run import DIRECTION_ARROWS

if TYPE_CHECKING:  # annotations only: importing this module stays cheap
    import pandas as pd

    from helpers.cluster.run import ClusterResult
    from helpers.coref.run import CorefRun
    from helpers.syntax.stats import HeadScores


# ------------------------------------------------------------------------------- §2 attention maps (chapter 02)


def token_table(tokens: list[str], word_of_token, words: list[str]) -> "pd.DataFrame":
    """``token | word position | word``: each of one example's ``tokens``, the position of the word it belongs to
    (``word_of_token``, ``[token]``, 0-based over ``words``) and that word (``words``: the positions' labels,
    :meth:`~helpers.core.models.LoadedModel.position_labels`: [CLS], the words, [SEP])."""
    import pandas as pd

    check_words(words)
    return pd.DataFrame({"token": tokens, "word position": word_of_token, "word": [words[w] for w in word_of_token]})


def first_mean_table(mean_attn: np.ndarray, first_attn: np.ndarray, words: list[str], *, layer: int, head: int,
                     word: int) -> "pd.DataFrame":
    """Two rows, ``mean (paper)`` and ``first (released code)``, one column per word of ``words``: the attention
    from word ``word`` in head ``(layer, head)`` (0-based) in word-level maps ``[layer, head, query, key]`` whose
    split words' rows are their tokens' mean (``mean_attn``, the paper) or their first token's row
    (``first_attn``, the released code); rounded to 3 places, the index named ``row of the split word``."""
    import pandas as pd

    check_words(words)
    rows = pd.DataFrame({"mean (paper)": mean_attn[layer, head, word], "first (released code)": first_attn[layer, head, word]},
                        index=words)
    return rows.T.round(3).rename_axis("row of the split word")


def maps_summary(split_fraction: float, row_sum_deviation: float, formula_max_diff: float) -> "pd.DataFrame":
    """Chapter 02's summary, ``claim | paper | this model | note``: the share of words split into several tokens
    (``split_fraction``, a fraction, beside the paper's ~8% on WSJ), the largest deviation of a word-level row's sum
    from 1 (``row_sum_deviation``) and the largest difference between the maps and softmax(QKᵀ/√d) recomputed from
    the layers' queries and keys (``formula_max_diff``)."""
    import pandas as pd

    rows = [("words split into several tokens", f"~{100 * paper.SPLIT_WORD_FRACTION.value:.0f}% (WSJ)",
             f"{100 * split_fraction:.1f}% (GUM dev)", "different corpus and vocabulary"),
            ("word-level rows sum to 1", "yes", f"max deviation {row_sum_deviation:.1e}", "by construction"),
            ("maps equal softmax(QKᵀ/√d)", "formula in §2", f"max difference {formula_max_diff:.1e}", "scaling written in")]
    return pd.DataFrame(rows, columns=["claim", "paper", "this model", "note"])


# ------------------------------------------------------------------------------- §3 surface


def example_heads(heads: dict[str, tuple[int, int]]) -> "pd.DataFrame":
    """Figure 1's heads as a table ``pattern | head``: ``heads`` maps each pattern to its 0-based
    ``(layer, head)`` (:func:`helpers.surface.run.figure1_heads`), shown 1-based ``layer-head``."""
    import pandas as pd

    return pd.DataFrame([(name, head_label(*lh)) for name, lh in heads.items()], columns=["pattern", "head"])


def causal_note(section, lm) -> str:
    """The sentence a section's chapter opens with on what its model's heads see: an encoder's see the whole input,
    as in the paper; for a decoder, the causal mask (:data:`helpers.section.CAUSAL_MASK`) and what the section's
    analyses are under it (:attr:`helpers.section.Section.causal`), said once on the record, so that every page
    says where a measure is undefined or changed."""
    from helpers.section import CAUSAL_MASK

    if not getattr(lm, "causal", False):
        return f"{lm.name} is an encoder: each of its heads sees the whole input, as BERT's did in the paper."
    inputs = "its inputs start with BOS" if lm.bos else "its inputs start with the first word (no BOS)"
    return (f"{lm.name} is a decoder ({inputs}), and this chapter reads it under its causal mask: {CAUSAL_MASK}. "
            f"Here ({section.paper or section.key}): {section.causal}.")


def decoder_sizes_note(record, decoder_ctx, ctx) -> str:
    """The sentence that says at which sizes the sinks chapter ran its decoder (``record``: the sinks section,
    which reads §3, §4.2 and §4.3): the book's own when its context is the book's, else the small configuration's
    (:func:`helpers.sinks.decoder.decoder_context`), with the numbers."""
    if decoder_ctx.small == ctx.small:
        return ("The decoder's analyses run at this build's sizes" + (" (the small test configuration)." if ctx.small
                                                                      else ", as the chapters run the book's model."))
    from helpers.results import section

    segments = record.settings(decoder_ctx)["n_segments"]
    sentences = section("syntax").settings(decoder_ctx)["max_sentences"]
    documents = section("coref").settings(decoder_ctx)["max_documents"]
    return (f"To keep the book's build within its budget, the decoder's analyses run at reduced sizes: {segments} "
            f"segments (§3 and the sinks), the first {sentences} sentences of each treebank (§4.2) and the first "
            f"{documents} documents of each coreference split (§4.3); the encoder beside it keeps the chapters' sizes. "
            "A book built for the decoder itself (BERT_ATTENTION_MODEL=smollm2) runs it at full size.")


def example_head_view(figure1, pattern: str):
    """Figure 1's panel for ``pattern`` (a key of :data:`helpers.surface.run.FIGURE1_PATTERNS`): the head view of its
    head on the example segment, or, for a pattern the model does not have (a decoder's next token or [SEP]), a
    line saying why nothing is drawn."""
    from helpers.presentation import views

    if pattern in figure1.undefined:
        return views.not_drawn(pattern, figure1.undefined[pattern])
    layer, head = figure1.heads[pattern]
    return views.head_view(figure1.attn, figure1.tokens, layer=layer, heads=[head], layers=[layer])


FITTED_HEAD = "fitted"  # how the §3 masked-LM report's "source" starts when the head was fitted by us


def mlm_source(mlm: dict) -> str:
    """The sentence naming the masked-LM head the §3 gradients come from (``mlm``: the §3 report's
    ``mlm``, :func:`helpers.surface.mlm.mlm_head`'s report)."""
    return "This model's head: " + mlm["source"] + "."


def mlm_note(mlm: dict) -> str:
    """The paragraph after :func:`mlm_source`: for a head we fitted, how it was fitted and how well it
    predicts held-out tokens (its loss against unigram frequencies), and what its gradients mean; for the
    checkpoint's own head, that the loss is the model's pre-training loss."""
    if not mlm["source"].startswith(FITTED_HEAD):
        return "The gradients are those of the model's own pre-training masked-LM loss, as in the paper."
    return (f"The checkpoint has no masked-LM head, so we fitted a small one (dense, GELU, layer norm, "
            f"scores against the frozen input embeddings) on {mlm['train_tokens']} masked tokens of other "
            f"GUM training segments, keeping the encoder frozen. Its held-out loss is {mlm['heldout_loss']:.2f} "
            f"nats per token against {mlm['heldout_unigram_loss']:.2f} for unigram frequencies. It is a probe "
            f"fitted by us, not the model's own pre-training objective, so these gradients show how much "
            f"attention weights matter for recovering masked words from this encoder, not what the model "
            f"was trained on.")


# ------------------------------------------------------------------------------- §4.2 syntax


def _with_interval(accuracy: float, interval: tuple[float, float], head: str) -> str:
    lo, hi = interval
    return f"{accuracy:.1f} [{lo:.1f}, {hi:.1f}] {head}"


def held_out_rows_shown(held: list[dict], relations: list[str]) -> list[dict]:
    """The rows of ``held`` (:func:`helpers.syntax.claims.held_out`, in its order) whose relation is one of
    ``relations`` (Table 1's)."""
    wanted = set(relations)
    return [row for row in held if row["relation"] in wanted]


def held_out_table(held: list[dict], relations: list[str]) -> "pd.DataFrame":
    """The held-out table of the syntax chapter, one row per relation of ``relations`` found in ``held`` (the
    §4.2 report's ``held_out``): its word count, the in-sample best head on GUM test and the head chosen on
    GUM dev scored on GUM test, each as ``accuracy [95% interval] head``, the offset baseline's
    accuracy, and the chosen head's gain over it on the same words, ``gain [95% interval]`` (paired)."""
    import pandas as pd

    rows = held_out_rows_shown(held, relations)
    return pd.DataFrame([{
        "relation": r["relation"], "count": r["count"],
        "in-sample (test)": _with_interval(r["in_sample_accuracy"], r["in_sample_ci"], r["in_sample_head"]),
        "chosen on dev → test": _with_interval(r["held_out_accuracy"], r["held_out_ci"], r["dev_head"]),
        "baseline_accuracy": r["baseline_accuracy"],
        "gain over the baseline": f"{r['gain']:+.1f} [{r['gain_ci'][0]:+.1f}, {r['gain_ci'][1]:+.1f}]",
    } for r in rows], columns=["relation", "count", "in-sample (test)", "chosen on dev → test",
                               "baseline_accuracy", "gain over the baseline"]).set_index("relation")


def held_out_drop(held: list[dict], relations: list[str]) -> float:
    """The mean, over the rows :func:`held_out_table` shows, of the in-sample accuracy minus the accuracy of
    the head chosen on dev (points; what selecting on other data costs)."""
    rows = held_out_rows_shown(held, relations)
    return float(np.mean([r["in_sample_accuracy"] - r["held_out_accuracy"] for r in rows]))


def possessive_table(plain: "HeadScores", convention: "HeadScores", relation: str) -> "pd.DataFrame":
    """``relation`` scored two ways, one row each: as UD scores it (``plain``: the possessor is the
    dependent) and with the paper's convention (``convention``: the 's counts as the dependent); the
    columns are those of :meth:`~helpers.syntax.stats.HeadScores.table`."""
    import pandas as pd

    return pd.DataFrame([{"scoring": "UD (possessor is the dependent)", **plain.table()[relation]},
                         {"scoring": "paper's convention ('s counts as the dependent)", **convention.table()[relation]}]
                        ).set_index("scoring")


# ------------------------------------------------------------------------------- §4.3 coreference


def table2_frame(dev: "CorefRun", test: "CorefRun", *, candidate_sets: tuple[str, ...] = ("mentions",)) -> "pd.DataFrame":
    """The chapter's Table 2, indexed by ``system``: the rows of :func:`helpers.coref.run.table2` (accuracies in
    percent to 0.1, the 95% interval of ``all`` as ``[lo, hi]``, empty for the baselines), then the paper's rows
    (``paper: <system>``) and the number of mentions of each type in ``test`` (``mentions (test)``; the frame's
    dtype is object, so the counts stay integers)."""
    import pandas as pd

    rows = []
    for row in table2(dev, test, candidate_sets=candidate_sets):
        lo_hi = row["interval"]
        rows.append({"system": row["system"], **{k: round(row[k], 1) for k in ("all", *MENTION_TYPES)},
                     "95% interval (all)": f"[{lo_hi[0]:.1f}, {lo_hi[1]:.1f}]" if lo_hi else ""})
    for name, values in paper.TABLE2.items():
        rows.append({"system": f"paper: {name}", **values._asdict(), "95% interval (all)": ""})
    counts = test.counts()
    rows.append({"system": "mentions (test)", **{k: counts[k] for k in ("all", *MENTION_TYPES)}, "95% interval (all)": ""})
    return pd.DataFrame(rows, dtype=object).set_index("system")


def coref_accuracy_frame(accuracy: dict[str, np.ndarray]) -> "pd.DataFrame":
    """Long table ``relation, direction, layer, head, label, accuracy`` of every head (1-based; accuracy to 0.1) for
    :func:`helpers.presentation.charts.accuracy_heatmap`: one ``relation`` per mention type of ``accuracy``
    (:meth:`helpers.coref.run.CorefRun.accuracy`, ``{type: [layer, head]}``), the direction always
    ``mention head → candidates``."""
    import pandas as pd

    return pd.DataFrame([{"relation": kind, "direction": "mention head → candidates", "layer": l + 1, "head": h + 1,
                          "label": head_label(l, h), "accuracy": round(float(a[l, h]), 1)}
                         for kind, a in accuracy.items() for l in range(a.shape[0]) for h in range(a.shape[1])])


# ------------------------------------------------------------------------------- §5 probes


def _mean_sd(summary: dict) -> str:
    """``mean ± sd`` of a probe's summary over seeds (only the mean for one seed, whose sd is 0)."""
    return f"{summary['mean']:.1f} ± {summary['sd']:.1f}" if summary["sd"] else f"{summary['mean']:.1f}"


TABLE3_ORDER = ("Right-branching", *(label for label, *_ in CONFIGS))  # the paper's order, then the misaligned row


def table3(result: dict) -> "pd.DataFrame":
    """Table 3 (UAS without punctuation): one row per probe of ``result`` (:func:`helpers.probe.run.run_probes`),
    its GUM test UAS with greedy and with maximum-spanning-tree decoding and its EWT dev UAS, each as
    ``mean ± sd`` over seeds, the number of seeds, and the paper's UAS for that probe
    (:func:`helpers.paper.table3`; "—" where the paper has no such row). Rows in :data:`TABLE3_ORDER` (any
    other after them): a result read back from the cache has its rows sorted by name."""
    import pandas as pd

    rows = sorted(result["rows"].items(), key=lambda item: (TABLE3_ORDER.index(item[0]) if item[0] in TABLE3_ORDER
                                                            else len(TABLE3_ORDER)))
    return pd.DataFrame([{
        "probe": name,
        "GUM test UAS": _mean_sd(r["test"]),
        "GUM test UAS, MST decoding": _mean_sd(r["test_mst"]) if "test_mst" in r else None,
        "EWT dev UAS": _mean_sd(r["ewt"]),
        "seeds": len(r["test"]["runs"]),
        "paper (WSJ)": str(paper.table3(name)) if paper.table3(name) is not None else None,
    } for name, r in rows]).set_index("probe")


# The §5 chapter's pooled intervals, glued by name: (name, probe, baseline or None for the probe's own UAS).
PROBE_GAINS = (("attn_ci", "Attn", None), ("attn_words_ci", "Attn + words", None),
               ("random_ci", "Random-init Attn + words", None), ("attn_over_rb", "Attn", "Right-branching"),
               ("aw_over_attn", "Attn + words", "Attn"), ("aw_over_dist", "Attn + words", "Distances + words"),
               ("aw_over_random", "Attn + words", "Random-init Attn + words"))


def probe_gain_texts(result: dict) -> dict[str, str]:
    """``{name: "55.4 [54.6, 56.3]"}`` for each of :data:`PROBE_GAINS`: a probe's UAS on GUM test, or its gain over a
    baseline (signed), with the interval pooled over seeds and paired on the sentences
    (:func:`helpers.probe.claims.gain`)."""
    from helpers.probe.claims import gain

    out = {}
    for name, probe, baseline in PROBE_GAINS:
        g = gain(result, probe, baseline)
        sign = "+" if baseline else ""
        out[name] = f"{g['estimate']:{sign}.1f} [{g['interval'][0]:{sign}.1f}, {g['interval'][1]:{sign}.1f}]"
    return out


# ------------------------------------------------------------------------------- §6 clustering

HEAD_STATISTICS = ("next", "prev", "entropy", "cls", "sep", "punct")  # §3 statistics shown with each head


def head_frame(result: "ClusterResult", linguistic: dict[str, str]) -> "pd.DataFrame":
    """One row per head (flattened ``layer * n_heads + head``) for Figure 6's maps: its 1-based ``head`` label,
    ``layer``, ``behaviour`` (the one found in the syntax or coreference chapter, ``linguistic``, else the
    surface statistics' label) and its §3 statistics (:data:`HEAD_STATISTICS`, 3 decimals)."""
    import pandas as pd

    stats = result.stats.per_head
    return pd.DataFrame({
        "head": result.labels,
        "layer": [k // result.n_heads + 1 for k in range(len(result.labels))],
        "behaviour": [linguistic.get(label, b) for label, b in zip(result.labels, result.behaviours)],
        **{name: np.round(stats[name].ravel(), 3) for name in HEAD_STATISTICS},
    })


def layer_table(result: "ClusterResult") -> "pd.DataFrame":
    """Per layer (1-based): the mean distance between two of its heads and from them to the heads of other
    layers (:func:`helpers.cluster.stats.layer_distances`), rounded to whole numbers."""
    import pandas as pd

    return pd.DataFrame([{"layer": r["layer"], "mean distance within": round(r["within"]),
                          "mean distance to other layers": round(r["to_others"])}
                         for r in layer_distances(result.distance, result.n_heads)]).set_index("layer")


def behaviour_counts(heads: "pd.DataFrame") -> tuple[int, str]:
    """``(heads with a behaviour, "label count, ...")`` of :func:`head_frame`'s ``behaviour`` column, most
    frequent first (ties in order of first appearance), without :data:`~helpers.cluster.run.NO_BEHAVIOUR`;
    "none" when no head has one."""
    counts = heads["behaviour"].value_counts()
    shown = [(label, int(n)) for label, n in counts.items() if label != NO_BEHAVIOUR]
    return sum(n for _, n in shown), ", ".join(f"{label} {n}" for label, n in shown) or "none"


# ------------------------------------------------------------------------------- attention norms (beyond the paper)


def norms_table1(rows: list[dict]) -> "pd.DataFrame":
    """The norms chapter's Table 1, indexed by ``relation``, from :func:`helpers.norms.run.table1_comparison`'s
    ``rows``: the count; under weight maps and under norm maps, the best head with its direction (``5-2 dep→head``)
    and its accuracy; the change, its paired 95 % interval where the rows carry one (``[-0.4, 2.1]``), and the
    baseline; numbers rounded to 0.1."""
    import pandas as pd

    def interval(r) -> dict:
        iv = r.get("change_interval")
        return {} if iv is None else {"change: 95% interval": f"[{iv[0]:.1f}, {iv[1]:.1f}]"}

    frame = pd.DataFrame([{"relation": r["relation"], "count": r["count"],
                           "weights: head": f"{r['weights_head']} {DIRECTION_ARROWS[r['weights_direction']]}",
                           "weights: accuracy": r["weights_accuracy"],
                           "norms: head": f"{r['norms_head']} {DIRECTION_ARROWS[r['norms_direction']]}",
                           "norms: accuracy": r["norms_accuracy"],
                           "change": r["change"], **interval(r), "baseline": r["baseline_accuracy"]} for r in rows])
    return frame.set_index("relation").round(1)


# ------------------------------------------------------------------------------- attention sinks (beyond the paper)


def where_attention_goes(per_head: dict[str, np.ndarray], uniform_entropy: float, broad_fraction: float) -> dict[str, np.ndarray]:
    """Per layer ``[layer]``, from §3's per-head statistics ``[layer, head]`` of one model: the mean share of
    attention to the first position (``cls``), to the previous token (``prev``) and to "." or "," (``punct``),
    and the share of heads that attend broadly (mean entropy at least ``broad_fraction`` of ``uniform_entropy``)."""
    out = {"first position": per_head["cls"].mean(1), "previous token": per_head["prev"].mean(1),
           ". or ,": per_head["punct"].mean(1)}
    out["broad heads (share of heads)"] = (per_head["entropy"] >= broad_fraction * uniform_entropy).mean(1)
    return out


def sink_layer_lines(weights: np.ndarray, norms: np.ndarray, no_bos: np.ndarray | None, epsilon: float) -> dict[str, np.ndarray]:
    """Per layer ``[layer]``: the mean ``alpha_1`` under weights and under norms (each ``[layer, head]``) and the sink
    rate (share of heads with ``alpha_1 > epsilon``), with BOS and, when ``no_bos`` is given, without it."""
    out = {"alpha_1 (weights)": np.asarray(weights).mean(1), "alpha_1 (norms)": np.asarray(norms).mean(1),
           "sink rate": (np.asarray(weights) > epsilon).mean(1)}
    if no_bos is not None:
        out["alpha_1 without BOS (weights)"] = np.asarray(no_bos).mean(1)
        out["sink rate without BOS"] = (np.asarray(no_bos) > epsilon).mean(1)
    return out


def sink_comparison(models: list[dict], epsilon: float) -> "pd.DataFrame":
    """One row per model: ``models`` holds dicts with ``name``, ``first`` (what position 1 holds: "BOS", "[CLS]"),
    ``weights`` (``alpha_1`` ``[layer, head]``) and ``sep`` (the §3 [SEP] shares ``[layer, head]``, ``None`` for a
    decoder). Columns: layers x heads, the sink rate over all heads and over the upper half of the layers, the
    largest layer-mean ``alpha_1`` (with its 1-based layer) and the largest layer-mean [SEP] share ("—" when none)."""
    import pandas as pd

    rows = []
    for m in models:
        w = np.asarray(m["weights"])
        n_layers = w.shape[0]
        by_layer = w.mean(1)
        top = int(np.argmax(by_layer))
        row = {"model": m["name"], "layers x heads": f"{n_layers} x {w.shape[1]}", "position 1": m["first"],
               "sink rate": round(float((w > epsilon).mean()), 2),
               "sink rate, upper half": round(float((w[n_layers // 2:] > epsilon).mean()), 2),
               "largest layer-mean alpha_1": f"{by_layer[top]:.2f} (layer {top + 1})"}
        sep = m.get("sep")
        if sep is None:
            row["largest layer-mean [SEP] share"] = "—"
        else:
            sep_layer = np.asarray(sep).mean(1)
            s = int(np.argmax(sep_layer))
            row["largest layer-mean [SEP] share"] = f"{sep_layer[s]:.2f} (layer {s + 1})"
        rows.append(row)
    return pd.DataFrame(rows).set_index("model")


def decoder_heads_table(rows: list[dict], coref: tuple[tuple[int, int], float, float] | None) -> "pd.DataFrame":
    """The best head of a decoder per relation: ``rows`` as :func:`helpers.syntax.run.table1_rows` gives them (the
    paper's columns dropped: the paper has no decoder), then, when ``coref`` is given as ``((layer, head), accuracy,
    baseline)`` (0-based head chosen on dev, test accuracy and the best baseline's, in %), a row "coreference"."""
    import pandas as pd

    out = [{"relation": r["relation"], "count": r["count"], "head": r["head"], "direction": r["direction"],
            "accuracy": r["accuracy"], "baseline": r["baseline"]} for r in rows]
    if coref is not None:
        (layer, head), accuracy, baseline = coref
        out.append({"relation": "coreference (antecedent)", "count": None, "head": head_label(layer, head),
                    "direction": "mention → antecedent", "accuracy": round(float(accuracy), 1),
                    "baseline": f"{baseline:.1f}"})
    return pd.DataFrame(out, dtype=object).set_index("relation")
