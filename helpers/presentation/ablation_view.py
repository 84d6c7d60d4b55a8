"""What the ablation chapter shows, built from the ``ablate`` JSON (:meth:`helpers.ablation.section.AblationSectionReport.to_json`):
per-head heat maps of the single-head effect and of importance with the paper's heads marked, the pruning curves,
the sink tests, the paper's heads among all heads, and the sentences that say what was run. Each chapter cell calls
one of these.

Heads are labelled 1-based ``"layer-head"``; layers and heads are 1-based on axes.

>>> effect_heatmaps(report.to_json())                       # doctest: +SKIP
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from helpers.core.labels import head_label
from helpers.presentation.charts import PALETTE
from helpers.presentation.views import altair_offline, not_drawn

KIND_NAMES = {"syntax": "§4.2 best heads", "coref": "§4.3 coreference head", "positional": "§3.1 positional heads",
              "broad": "§3.3 broad heads", "specialised": "§4.2 heads past the margin (judged)", "all": "all of them"}
SINK_NAMES = {"sep": "[SEP]", "cls": "[CLS]", "bos": "BOS"}
TEST_NAMES = {"noop": "no-op (value term removed)", "redirect": "redirect (weights renormalised without it)",
              "control": "control (a random content token's value term removed)"}


def _marks(result: dict) -> dict[str, str]:
    """``{"L-H": "§4.2, §3.1"}``: the kinds of paper head each head is (``all`` left out)."""
    found: dict[str, list[str]] = {}
    for kind, entry in (result.get("paper_heads") or {}).items():
        if kind in ("all", "specialised"):  # the union, and a subset of §4.2's
            continue
        for label in entry["heads"]:
            found.setdefault(label, []).append(KIND_NAMES.get(kind, kind).split(" ")[0])
    return {k: ", ".join(v) for k, v in found.items()}


def head_scores_frame(result: dict) -> pd.DataFrame:
    """Long table ``layer, head, label, measure, value, paper`` of the single-head effect (% of the loss), the same
    with the head's context replaced by its mean (mean ablation, where run) and the layer-normalised importance, one
    row per head and measure; ``paper`` names the paper's kinds the head is."""
    marks = _marks(result)
    measures = {}
    if result.get("delta_relative") is not None:
        measures["loss change when removed (% of the loss)"] = 100 * np.asarray(result["delta_relative"])
    if result.get("delta_mean_relative") is not None:
        measures["loss change when replaced by its mean (% of the loss)"] = 100 * np.asarray(result["delta_mean_relative"])
    if result.get("importance_normalised") is not None:
        measures["importance (layer-normalised)"] = np.asarray(result["importance_normalised"])
    rows = []
    for name, values in measures.items():
        for layer in range(values.shape[0]):
            for head in range(values.shape[1]):
                label = head_label(layer, head)
                rows.append({"layer": layer + 1, "head": head + 1, "label": label, "measure": name,
                             "value": float(values[layer, head]), "paper": marks.get(label, "")})
    return pd.DataFrame(rows, columns=["layer", "head", "label", "measure", "value", "paper"])


def effect_heatmaps(result: dict, *, size: int = 260):
    """Layer x head heat maps side by side: each head's single-head effect (zeroed; replaced by its mean, where run)
    and its importance; the paper's heads are ringed (hover for which). A part not run is left out; with none, a line
    says so."""
    alt = altair_offline()

    frame = head_scores_frame(result)
    if frame.empty:
        return not_drawn("the per-head effects", "neither the single-head effects nor importance were run")
    charts = []
    n_layers, n_heads = int(frame["layer"].max()), int(frame["head"].max())
    height = size * n_layers / max(n_heads, 1)
    for name, part in frame.groupby("measure", sort=False):
        scheme = "redblue" if "change" in name else "viridis"
        domain = None
        if "change" in name:
            top = float(np.abs(part["value"]).max()) or 1.0
            domain = [-top, top]
        color = alt.Color("value:Q", title=None, scale=alt.Scale(scheme=scheme, reverse="change" in name,
                                                                 **({"domain": domain} if domain else {})))
        base = alt.Chart(part).encode(x=alt.X("head:O", title="Head"), y=alt.Y("layer:O", title="Layer"))
        cells = base.mark_rect().encode(color=color, tooltip=[
            alt.Tooltip("label:N", title="head"), alt.Tooltip("value:Q", format=".3g", title=name),
            alt.Tooltip("paper:N", title="paper's head")])
        rings = base.transform_filter(alt.datum.paper != "").mark_point(shape="circle", size=size / 2, filled=False,
                                                                         color="black", strokeWidth=1.5)
        charts.append(alt.layer(cells, rings).properties(title=name, width=size, height=height))
    return alt.hconcat(*charts).resolve_scale(color="independent")


def prune_frame(result: dict) -> pd.DataFrame:
    """``share, order, loss, low, high``: the pruning curves (the order fitted on the other half of the sentences:
    by importance, by the measured single-head effect; and importance scored on its own sentences) and the random
    orders' mean with their range (``low``/``high``, the random orders' min and max)."""
    p = result["prune"]
    curves = {"by importance (held out)": p["importance"]}
    if p.get("by_delta") is not None:
        curves["by measured D (held out)"] = p["by_delta"]
    if p.get("in_sample") is not None:
        curves["by importance (scored on its own sentences)"] = p["in_sample"]
    rows = [{"share": 100 * s, "order": name, "loss": l, "low": l, "high": l}
            for name, curve in curves.items() for s, l in zip(p["shares"], curve)]
    rows += [{"share": 100 * s, "order": f"random ({len(p['seeds'])} seeds, mean and range)", "loss": m, "low": lo,
              "high": hi} for s, m, lo, hi in zip(p["shares"], p["random_mean"], p["random_min"], p["random_max"])]
    return pd.DataFrame(rows)


def prune_chart(result: dict, *, width: int = 440, height: int = 260):
    """The pruning curves: the loss against the share of heads removed, by importance and in random orders (their
    range shaded); the full model's loss as a rule. Click a legend entry to highlight an order."""
    alt = altair_offline()

    if result.get("prune") is None:
        return not_drawn("the pruning curve", "it was not run (see the sizes above)")
    frame = prune_frame(result)
    order = list(dict.fromkeys(frame["order"]))
    color = alt.Color("order:N", sort=order, scale=alt.Scale(domain=order, range=PALETTE[: len(order)]), title=None)
    pick = alt.selection_point(fields=["order"], bind="legend")
    opacity = alt.condition(pick, alt.value(0.9), alt.value(0.15))
    x = alt.X("share:Q", title="Heads removed (%)")
    y = alt.Y("loss:Q", title="mean loss (nats)", scale=alt.Scale(zero=False))  # what the loss is: the page's Setup
    band = alt.Chart(frame[frame["order"] == order[-1]]).mark_area(opacity=0.2).encode(  # the random orders' range
        x=x, y=alt.Y("low:Q", title="mean loss (nats)", scale=alt.Scale(zero=False)), y2="high:Q", color=color)
    lines = alt.Chart(frame).mark_line(point=True).encode(
        x=x, y=y, color=color, opacity=opacity,
        tooltip=["order:N", alt.Tooltip("share:Q", format=".0f", title="removed (%)"),
                 alt.Tooltip("loss:Q", format=".3f")]).add_params(pick)
    full = alt.Chart(pd.DataFrame({"y": [result["base_loss"]]})).mark_rule(strokeDash=[6, 4], color="black").encode(
        y="y:Q", tooltip=[alt.Tooltip("y:Q", format=".3f", title="every head present")])
    return alt.layer(band, lines, full).properties(width=width, height=height)


def _interval(value: float | None, interval: Sequence[float] | None, base: float) -> str:
    if value is None:
        return "—"
    lo, hi = interval if interval is not None else (float("nan"), float("nan"))
    return f"{100 * value / base:+.2f} % [{100 * lo / base:+.2f}, {100 * hi / base:+.2f}]"


def _relative(entry: dict | None) -> str:
    """``"+0.12 % [-0.03, +0.30]"``: a change over the full model's loss on the same sentences, with its interval."""
    return "—" if entry is None else _interval(entry["relative"], entry["relative_interval"], 1.0)


def sink_rows(result: dict) -> list[dict]:
    """One row per sink and test: the loss change with the test on every head at once (% of the full model's loss,
    95 % interval over sentences), and per head its largest change and the head it comes from (% of the full
    model's loss on the detail sentences, where the per-head tests ran); then the matched control on every head at
    once (a random content token's value term removed), where run."""
    base = result["base_loss"]
    detail = result.get("detail_base_loss") or base
    rows = []
    for kind, tests in (result.get("sinks") or {}).items():
        for test, entry in tests.items():
            row = {"sink": SINK_NAMES.get(kind, kind), "test": TEST_NAMES.get(test, test),
                   "every head at once": _interval(entry["all"], entry["all_interval"], base)}
            if entry["per_head"] is not None:
                per = np.asarray(entry["per_head"])
                layer, head = np.unravel_index(int(np.argmax(np.abs(per))), per.shape)
                row["largest per head"] = f"{100 * per[layer, head] / detail:+.2f} % ({head_label(layer, head)})"
            else:
                row["largest per head"] = "—"
            rows.append(row)
    if result.get("sinks_control") is not None:
        rows.append({"sink": "a content token", "test": TEST_NAMES["control"],
                     "every head at once": _relative(result["sinks_control"]), "largest per head": "—"})
    return rows


def sink_set_rows(result: dict) -> list[dict]:
    """One row per sink: whether it is a sink of this model (its largest layer-mean share), the heads that put more
    than the sink share on it, and the tests on those heads at once (% of the loss, 95 % interval over sentences):
    no-op, the matched control, control minus no-op, redirect; and Spearman's rho of a head's share with its own
    no-op effect."""
    premise = result.get("sink_premise") or {}
    sets = result.get("sink_sets") or {}
    rows = []
    for kind in (result.get("sinks") or premise or {}):
        if kind == "measured":
            continue
        info = premise.get(kind)
        entry = sets.get(kind)
        sp = None if entry is None else entry.get("spearman")
        rows.append({
            "sink": SINK_NAMES.get(kind, kind) + (" (measured sink)" if premise.get("measured") == kind else ""),
            "largest layer share": "—" if info is None else f"{info['layer_max']:.2f}",
            "a sink?": "—" if info is None else ("yes" if info["reason"] is None else "no"),
            "its heads": 0 if entry is None else len(entry["heads"]),
            "no-op": _relative(None if entry is None else entry["noop"]),
            "control": _relative(None if entry is None else entry["control"]),
            "control minus no-op": _relative(None if entry is None else entry["control_minus_noop"]),
            "redirect": _relative(None if entry is None else entry["redirect"]),
            "share vs own no-op (rho)": "—" if sp is None or sp["rho"] != sp["rho"]
            else f"{sp['rho']:.2f} [{sp['interval'][0]:.2f}, {sp['interval'][1]:.2f}]"})
    return rows


def large_share_source(causal: bool, encoder: float, decoder: float) -> str:
    """Whose figure the pruning claim's "large share" is: Michel et al.'s for fine-tuned BERT (an encoder,
    ``encoder``) or for their translation model (used for a decoder, ``decoder``), the other named beside it."""
    if causal:
        return (f"Michel et al.'s figure for their translation model, used for a decoder; for BERT, an encoder, it is "
                f"{encoder:.0%}")
    return (f"Michel et al.'s figure for fine-tuned BERT, an encoder; for their translation model, used for a "
            f"decoder, it is {decoder:.0%}")


def scale_note(result: dict) -> str:
    """The loss's scale on the chapter's sentences: the full model's, every head removed (and what that costs, as a
    share of the loss), and the unigram loss (token frequencies alone), in nats."""
    scale = result.get("loss_scale") or {}
    base = scale.get("base", result["base_loss"])
    parts = [f"{base:.2f} nats with every head"]
    if scale.get("every_head_removed") is not None:
        parts.append(f"{scale['every_head_removed']:.2f} with every head removed "
                     f"({100 * (scale['every_head_removed'] / base - 1):+.1f} % of the loss)")
    if scale.get("unigram") is not None:
        parts.append(f"{scale['unigram']:.2f} for token frequencies alone (the unigram loss)")
    return ", ".join(parts)


def sink_frame(result: dict) -> pd.DataFrame:
    """``label, sink, test, share, change``: per head, its share of attention on the sink (§3's statistics) and the
    loss change (% of the full model's loss on the same, detail, sentences) with the test applied to it alone."""
    base = result.get("detail_base_loss") or result["base_loss"]
    shares = result.get("sink_share") or {}
    rows = []
    for kind, tests in (result.get("sinks") or {}).items():
        if kind not in shares:
            continue
        share = np.asarray(shares[kind])
        for test, entry in tests.items():
            if entry["per_head"] is None:
                continue
            per = 100 * np.asarray(entry["per_head"]) / base
            for layer in range(per.shape[0]):
                for head in range(per.shape[1]):
                    rows.append({"label": head_label(layer, head), "sink": SINK_NAMES.get(kind, kind),
                                 "test": TEST_NAMES.get(test, test), "share": float(share[layer, head]),
                                 "change": float(per[layer, head])})
    return pd.DataFrame(rows, columns=["label", "sink", "test", "share", "change"])


def sink_chart(result: dict, *, width: int = 300, height: int = 240):
    """Per head: its share of attention on the sink (x) against the loss change of each test applied to it alone
    (y), one panel per sink; hover a point for the head. Without per-head tests or shares, a line says so."""
    alt = altair_offline()

    frame = sink_frame(result)
    if frame.empty:
        return not_drawn("the per-head sink tests", "they were not run here, or the sinks' shares were not read "
                                                    "(see the sizes above)")
    order = list(dict.fromkeys(frame["test"]))
    color = alt.Color("test:N", sort=order, scale=alt.Scale(domain=order, range=PALETTE[: len(order)]), title=None)
    return alt.Chart(frame).mark_circle(size=36, opacity=0.8).encode(
        x=alt.X("share:Q", title="share of attention on the sink"),
        y=alt.Y("change:Q", title="loss change (% of the loss)"), color=color,
        tooltip=[alt.Tooltip("label:N", title="head"), "test:N", alt.Tooltip("share:Q", format=".3f"),
                 alt.Tooltip("change:Q", format="+.3f")],
    ).properties(width=width, height=height).facet(column=alt.Column("sink:N", title=None))


def paper_heads_rows(result: dict) -> list[dict]:
    """One row per kind of paper head: the heads, and for the single-head effect and for importance their mean
    percentile among all heads and the permutation p-value against random sets of as many heads; then, for the
    single-head effect, the mean percentile of random heads from the same layers, the set's gain over it (95 %
    interval over sentences) and that test's permutation p-value."""
    rows = []
    for kind, e in (result.get("paper_heads") or {}).items():
        def fmt(name: str) -> tuple[str, str]:
            if e[f"{name}_mean_percentile"] is None:
                return "—", "—"
            return f"{e[f'{name}_mean_percentile']:.0f}", f"{e[f'{name}_p']:.3g}"

        d_pct, d_p = fmt("delta")
        i_pct, i_p = fmt("importance")
        gain = "—"
        if e.get("delta_gain") is not None:
            lo, hi = e.get("delta_gain_interval") or (float("nan"), float("nan"))
            gain = f"{e['delta_gain']:+.0f} [{lo:+.0f}, {hi:+.0f}]"
        same = "—" if e.get("delta_expected_percentile") is None else f"{e['delta_expected_percentile']:.0f}"
        p_layers = "—" if e.get("delta_p_layers") is None else f"{e['delta_p_layers']:.3g}"
        rows.append({"heads": KIND_NAMES.get(kind, kind), "which": ", ".join(e["heads"]) or "—",
                     "effect: mean percentile": d_pct, "effect: p": d_p,
                     "same layers: expected": same, "gain over them": gain, "same layers: p": p_layers,
                     "importance: mean percentile": i_pct, "importance: p": i_p})
    return rows


def loss_note(result: dict) -> str:
    """What the loss is, and for a fitted masked-LM head how well it predicts: its held-out loss against the unigram
    loss (what predicting the corpus's word frequencies alone costs)."""
    head = result.get("loss_head") or {}
    text = result["loss"]
    if "heldout_loss" in head and "heldout_unigram_loss" in head:
        text += (f"; on GUM dev segments the fitted head's loss is {head['heldout_loss']:.2f} nats, against "
                 f"{head['heldout_unigram_loss']:.2f} for word frequencies alone")
    return text


def sizes_note(result: dict) -> str:
    """What was run on how much, in one or two sentences, for the chapter's Setup."""
    parts = result["parts"]
    if result["settings"]["everything"]:
        return (f"Every part ran on all {result['segments']} sentences of GUM test of at least five words "
                f"({result['tokens']:,} tokens).")
    from helpers.ablation.run import PART_NAMES

    main = [PART_NAMES[p] for p in ("single", "mean", "importance", "prune", "sinks") if p in parts]
    detail = [PART_NAMES[p] for p in ("only", "sink_heads") if p in parts]
    text = (f"On the CPU the book runs a subset: {', '.join(main) or 'nothing'} on the first {result['segments']} "
            f"sentences of GUM test of at least five words ({result['tokens']:,} tokens)")
    if detail:
        text += f"; {' and '.join(detail)} on the first {result['detail_segments']} of them"
    missing = [PART_NAMES[p] for p in PART_NAMES if p not in parts]
    if missing:
        text += f"; not run here: {', '.join(missing)}"
    return text + ". On an accelerator every part runs on every sentence."


def rule_note(row: dict, *, percent: bool = False, fmt: str = ".2f") -> str:
    """What a claim's rule read, in words, from its JSON row (:meth:`helpers.claims.Claim.to_json`): a share of
    resampled sets, an estimate with its interval against the null and the level asked, an interval against a
    range, or a combined claim's parts each with its verdict; a claim not applicable: its reason. ``percent``:
    the estimates are shares of the loss (else numbers in ``fmt``)."""
    def _num(x: float, percent: bool) -> str:
        return f"{100 * x:+.2f} %" if percent else format(x, fmt)

    rule = row.get("rule")
    if rule is None:
        return f"not applicable: {row.get('reason')}"
    if rule == "share":
        return f"it holds in {100 * row['share']:.1f} % of the resampled sets of sentences"
    if rule == "effect":
        lo, hi = row["interval"]
        text = (f"{_num(row['estimate'], percent)} [{_num(lo, percent)}, {_num(hi, percent)}] against "
                f"{_num(row['null'], percent)} (no effect) and {_num(row['paper_level'], percent)} asked")
        if row.get("p_value") is not None:
            text += f", permutation p = {row['p_value']:.3g}"
        return text
    if rule == "within":
        lo, hi = row["interval"]
        low, high = row["range"]
        return (f"{_num(row['estimate'], percent)} [{_num(lo, percent)}, {_num(hi, percent)}] against the range "
                f"[{_num(low, percent)}, {_num(high, percent)}]")
    return "; ".join(f"{p['name']}: {rule_note(p, percent=percent, fmt=fmt)}, {p['verdict']}" for p in row["part_rows"])


def mean_ablation_note(result: dict, little: float) -> str:
    """Mean ablation beside zero ablation: the share of heads whose cost is at most ``little`` of the loss each way,
    and Spearman's rho between the two effects over heads; a line saying so where mean ablation was not run."""
    if result.get("delta_mean_relative") is None or result.get("delta_relative") is None:
        return "Mean ablation was not run here."
    from scipy.stats import spearmanr

    zero = np.ravel(result["delta_relative"])
    mean = np.ravel(result["delta_mean_relative"])
    rho = spearmanr(zero, mean).statistic if np.ptp(zero) > 0 and np.ptp(mean) > 0 else float("nan")
    return (f"with each head's context replaced by its mean over the sentences instead of zero, "
            f"{100 * np.mean(mean <= little):.1f} % of heads cost at most {100 * little:.0f} % of the loss "
            f"(zeroed: {100 * np.mean(zero <= little):.1f} %); the two effects rank the heads with Spearman's rho "
            f"{rho:.2f}")


def significant_note(result: dict) -> str:
    """Michel et al.'s count: how many heads' single-head effect has a 95 % interval that excludes 0."""
    sig = result.get("delta_significant")
    if sig is None:
        return "The single-head effects were not run here."
    return (f"{sig['raise'] + sig['lower']} of {sig['heads']} heads have an interval that excludes 0 "
            f"({sig['raise']} raise the loss when removed, {sig['lower']} lower it)")
