"""The ablation chapter's claims (beyond the paper): thresholds as named constants, each claim judged by one rule of
:mod:`helpers.claims` on its statistic's 95 % interval over resampled sentences, and :func:`claims`. Each claim is
a finding of the papers that removed heads (Michel et al. 2019; Voita et al. 2019; StreamingLLM, Xiao et al. 2024)
or Clark et al.'s §3.2 hypothesis, tested on this model; "reproduced" = it holds here.

- ``ablation-single-heads`` (share): most single heads can be removed at little cost (Michel §3.2): in at least 95 %
  of the resampled sentence sets, more than :data:`MOST` of the heads cost at most :data:`LITTLE_COST` of the loss;
- ``ablation-one-head-layers`` (share): many layers keep the loss with one head (Michel §3.3), the same way;
- ``ablation-pruning`` (combined): pruned by importance computed on other sentences than those scored, a large share
  of heads goes before the loss rises (share), and importance order beats random order (effect);
- ``ablation-paper-heads`` (effect, a permutation test standing in for the null): the heads that clear the syntax
  chapter's margin matter more than random heads drawn from the same layers (Voita);
- ``ablation-sink-noop`` and ``ablation-sink-noop-measured`` (combined): attention to [SEP], and to the model's
  measured sink, is a no-op (Clark §3.2; StreamingLLM), judged in the heads that put more than
  :data:`~helpers.surface.stats.SINK_SHARE` of their attention on it, only where the token is a sink of the model;
- ``ablation-importance-ranks`` (effect): Michel's importance ranks heads as their removal does (Spearman).

Every relative change is over the full model's loss on the same sentences, in each resampled set.

>>> rows = claims(summary, raw, causal=False)                        # doctest: +SKIP
"""
from __future__ import annotations

import math

import numpy as np

from helpers.ablation import stats
from helpers.ablation.run import SINK_NAMES
from helpers.claims import (Claim, Judged, Undefined, claim, combined, effect, judged_or_undefined, not_applicable,
                            share, within)
from helpers.core import bootstrap
from helpers.surface.stats import SINK_SHARE

SECTION = "beyond the paper"  # Michel et al.'s findings, tested on this model
PROBES_SECTION = "beyond §4"  # the heads of the paper's probes (§3, §4.2, §4.3)
SINK_SECTION = "beyond §3.2"  # Clark et al.'s "no-op" reading of attention to [SEP]
RESAMPLED = "sentences"       # every interval resamples the chapter's sentences
IDS = ("ablation-single-heads", "ablation-one-head-layers", "ablation-pruning", "ablation-paper-heads",
       "ablation-sink-noop", "ablation-sink-noop-measured", "ablation-importance-ranks")
# Named thresholds of the verdicts below (losses relative to the full model's mean loss on the same sentences).
LITTLE_COST = 0.01      # a head removed "at little cost": the loss rises by at most 1 % (our choice)
MOST = 0.5              # "most" heads: more than half
ONE_HEAD_COST = 0.05    # a layer "keeps the loss" with one head: its best single head costs at most 5 % (our choice)
MANY_LAYERS = 0.5       # "many layers": at least half of them (our choice)
PRUNE_RISE = 0.05       # the loss "rises" past 5 % above the full model's along the pruning curve (our choice)
# "A large share": Michel et al. (2019) §4, Figure 3: about 40 % of fine-tuned BERT's heads (an encoder) and 20 % of
# the WMT Transformer's (a translation model, decoding) are pruned before the score drops noticeably.
LARGE_SHARE_ENCODER = 0.4
LARGE_SHARE_DECODER = 0.2
PRUNE_GAIN = 0.01       # importance order "beats" random order: its loss lies below random order's by at least 1 %
                        # of the loss, averaged over the steps between none and every head removed (our choice)
PAPER_HEADS_GAIN = 25.0  # the specialised heads "matter more": their mean single-head-effect percentile at least 25
                         # points above random sets from the same layers (our choice: Voita et al. give no number)
NOOP_MAX = 0.01         # the no-op test "moves the loss little": within +-1 % of the loss (our choice) ...
CONTROL_GAP = 0.01      # ... by at least 1 % of the loss less than removing a random content token's value term from
                        # the same heads (the matched control; our choice) ...
REDIRECT_MIN = 0.02     # ... while redirecting the attention raises it by at least 2 % (our choice)
RHO_STRONG = 0.5        # importance "ranks heads as removal does": Spearman's rho at least this (our choice)


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _ci(x: float, interval) -> str:
    """``"+4.25 % [+1.92 %, +6.85 %]"``: a share of the loss with its interval."""
    return f"{100 * x:+.2f} % [{100 * interval[0]:+.2f} %, {100 * interval[1]:+.2f} %]"


# ------------------------------------------------------------------------------------ the statistics


def single_share(single: np.ndarray, base: np.ndarray) -> float:
    """The share of heads whose removal raises the loss by at most :data:`LITTLE_COST` of the full model's (``single``
    ``[layer, head, segment]`` losses with the head removed, ``base`` ``[segment]``)."""
    rel = (np.asarray(single) - base).sum(-1) / np.sum(base)
    return float(np.mean(rel <= LITTLE_COST))


def single_holds(single: np.ndarray, base: np.ndarray, *, n_boot: int = bootstrap.BOOTSTRAP, seed: int = 0) -> float:
    """The share of resampled sentence sets in which more than :data:`MOST` of the heads cost at most
    :data:`LITTLE_COST` of that set's loss."""
    diff = np.moveaxis(np.asarray(single, dtype=np.float64) - base, -1, 0)  # [S, L, H]
    c = bootstrap.counts(len(base), n_boot=n_boot, seed=seed)
    rel = bootstrap.sums(diff, c) / bootstrap.sums(base, c)[:, None, None]
    return bootstrap.share_holding((rel <= LITTLE_COST).reshape(n_boot, -1).mean(1) > MOST)


def layer_minima(only: np.ndarray, base: np.ndarray) -> np.ndarray:
    """``[layer]``: each layer's best head kept alone, its loss change over the full model's loss on the same
    (detail) sentences (``only`` ``[layer, head, segment]``, ``base`` the base losses of those sentences)."""
    return ((np.asarray(only) - base).sum(-1) / np.sum(base)).min(1)


def one_head_holds(only: np.ndarray, base: np.ndarray, *, n_boot: int = bootstrap.BOOTSTRAP, seed: int = 0) -> float:
    """The share of resampled sentence sets in which at least :data:`MANY_LAYERS` of the layers keep the loss within
    :data:`ONE_HEAD_COST` with their best head alone."""
    diff = np.moveaxis(np.asarray(only, dtype=np.float64) - base, -1, 0)
    c = bootstrap.counts(len(base), n_boot=n_boot, seed=seed)
    rel = (bootstrap.sums(diff, c) / bootstrap.sums(base, c)[:, None, None]).min(2)   # [n_boot, layer]
    return bootstrap.share_holding((rel <= ONE_HEAD_COST).mean(1) >= MANY_LAYERS)


def prune_share(shares, held_out: np.ndarray, base: np.ndarray) -> float:
    """The largest share of heads pruned before the held-out curve (``[step, segment]``) first rises past
    :data:`PRUNE_RISE` over the full model's loss on the same sentences."""
    return stats.largest_share_within(shares, np.asarray(held_out).mean(-1), float(np.mean(base)) * (1 + PRUNE_RISE))


def prune_holds(shares, held_out: np.ndarray, base: np.ndarray, large: float, *, n_boot: int = bootstrap.BOOTSTRAP,
                seed: int = 0) -> float:
    """The share of resampled sentence sets in which at least ``large`` of the heads are pruned before the curve
    rises (:func:`prune_share` of each set)."""
    c = bootstrap.counts(len(base), n_boot=n_boot, seed=seed)
    curves = bootstrap.mean_replicates(np.asarray(held_out, dtype=np.float64).T, c)   # [n_boot, step]
    limits = bootstrap.mean_replicates(np.asarray(base, dtype=np.float64), c) * (1 + PRUNE_RISE)
    return bootstrap.share_holding([stats.largest_share_within(shares, curve, limit) >= large
                                    for curve, limit in zip(curves, limits)])


def prune_gain(held_out: np.ndarray, random: np.ndarray, base: np.ndarray, *, n_boot: int = bootstrap.BOOTSTRAP,
               seed: int = 0) -> tuple[float, tuple[float, float]]:
    """``(gain, interval)``: random order's loss minus importance order's, averaged over the steps between none and
    every head removed, over the full model's loss, on the same sentences (``held_out`` ``[step, segment]``,
    ``random`` ``[seed, step, segment]``: the random orders' mean per segment)."""
    inner = slice(1, np.shape(held_out)[0] - 1)
    gap = (np.asarray(random).mean(0) - np.asarray(held_out))[inner].mean(0)     # [segment]
    c = bootstrap.counts(len(base), n_boot=n_boot, seed=seed)
    return (float(gap.sum() / np.sum(base)),
            bootstrap.percentile_interval(bootstrap.ratio_replicates(gap, np.asarray(base, dtype=np.float64), c)))


# ------------------------------------------------------------------------------------ the claims


def _rows_of(summary: dict, raw: dict, causal: bool, seed: int, n_boot: int) -> list[Claim]:
    rows = []
    base = np.asarray(raw["base"], dtype=np.float64) if raw.get("base") is not None else None
    S = raw["segments"]
    sec = SECTION

    text = "most single heads can be removed at little cost"
    paper = "Michel et al. §3.2: most heads, no significant change"
    if raw.get("single") is None:
        rows.append(not_applicable("ablation-single-heads", sec, text, paper, "the single-head effects were not run"))
    else:
        single = np.asarray(raw["single"], dtype=np.float64)
        full = single_share(single, base)
        holds = single_holds(single, base, n_boot=n_boot, seed=seed)
        ours = (f"{_pct(full)} of heads cost at most {_pct(LITTLE_COST)} of the loss; more than half do in "
                f"{_pct(holds)} of resampled sets of the {S} sentences")
        sig = summary.get("delta_significant")
        if sig:
            ours += (f"; Michel's count: {sig['raise'] + sig['lower']} of {sig['heads']} heads' intervals exclude 0 "
                     f"({sig['raise']} raise the loss, {sig['lower']} lower it)")
        rows.append(claim("ablation-single-heads", sec, text, paper, ours, 100 * full,
                          judged_or_undefined(share, holds, estimate=full, name="more than half cost little"),
                          resampled=RESAMPLED, n=S))

    text = "many layers keep the loss with one head"
    paper = "Michel et al. §3.3: many layers reduced to one head"
    if raw["n_heads"] < 2:
        rows.append(not_applicable("ablation-one-head-layers", sec, text, paper, "the model has one head per layer"))
    elif raw.get("only") is None:
        rows.append(not_applicable("ablation-one-head-layers", sec, text, paper, "all but one was not run"))
    else:
        only = np.asarray(raw["only"], dtype=np.float64)
        n = only.shape[-1]
        mins = layer_minima(only, base[:n])
        within_cost = int(np.sum(mins <= ONE_HEAD_COST))
        holds = one_head_holds(only, base[:n], n_boot=n_boot, seed=seed)
        full = within_cost / len(mins)
        rows.append(claim("ablation-one-head-layers", sec, text, paper,
                          f"{within_cost} of {len(mins)} layers within {_pct(ONE_HEAD_COST)} of the loss with their "
                          f"best head alone; at least half are in {_pct(holds)} of resampled sets of the {n} "
                          "sentences", 100 * full,
                          judged_or_undefined(share, holds, estimate=full, name="at least half the layers"),
                          resampled=RESAMPLED, n=n))

    large = LARGE_SHARE_DECODER if causal else LARGE_SHARE_ENCODER
    text = "pruned by importance, a large share of heads goes before the loss rises, and importance beats random order"
    paper = "Michel et al. §4: about 40 % of BERT's heads (20 % WMT)"
    prune = raw.get("prune")
    if prune is None:
        why = ("the pruning curve was not run" if "prune" not in raw.get("parts", ("prune",)) or S >= 2
               else "a held-out pruning curve needs at least 2 sentences")
        rows.append(not_applicable("ablation-pruning", sec, text, paper, why))
    else:
        held = np.asarray(prune["held_out"], dtype=np.float64)
        full = prune_share(prune["shares"], held, base)
        holds = prune_holds(prune["shares"], held, base, large, n_boot=n_boot, seed=seed)
        gain, interval = prune_gain(held, prune["random"], base, n_boot=n_boot, seed=seed)
        parts = judged_or_undefined(lambda: combined(
            share(holds, estimate=full, name=f"at least {_pct(large)} of heads before the loss rises"),
            effect(gain, interval, null=0.0, paper=PRUNE_GAIN, name="importance order below random order")))
        ours = (f"importance from the other half of the {S} sentences: {_pct(full)} of heads pruned within "
                f"{_pct(PRUNE_RISE)} of the loss (at least {_pct(large)} in {_pct(holds)} of resampled sets); "
                f"random order's loss above importance order's by {_ci(gain, interval)} of the loss")
        if prune.get("by_delta") is not None:
            ours += (f"; ordered by measured D (the other half's), {_pct(prune_share(prune['shares'], prune['by_delta'], base))}"
                     " pruned within it")
        rows.append(claim("ablation-pruning", sec, text, paper, ours, 100 * full, parts, resampled=RESAMPLED, n=S))

    rows.append(_paper_heads_row(summary, raw, S))
    rows += _sink_rows(summary, raw, causal, S)

    text = "Michel's importance ranks heads as their actual removal does"
    paper = "Michel et al. §4 (importance as a proxy for removal)"
    sp = summary.get("spearman")
    if sp is None or not math.isfinite(sp["rho"]):
        why = ("importance or the single-head effects were not run" if sp is None
               else "importance or the single-head effect is the same for every head: no ranks to compare")
        rows.append(not_applicable("ablation-importance-ranks", sec, text, paper, why))
    else:
        lo, hi = sp["interval"]
        rows.append(claim("ablation-importance-ranks", sec, text, paper, f"Spearman rho {sp['rho']:.2f} [{lo:.2f}, "
                          f"{hi:.2f}] over heads ({S} sentences)", sp["rho"],
                          judged_or_undefined(effect, sp["rho"], sp["interval"], null=0.0, paper=RHO_STRONG,
                                              name="Spearman's rho"), resampled=RESAMPLED, n=S))
    return rows


def _paper_heads_row(summary: dict, raw: dict, S: int) -> Claim:
    text = "the heads the paper's probes find matter more than random heads"
    paper = "Voita et al.: specialised heads are the last pruned"
    id_ = "ablation-paper-heads"
    found = summary.get("paper_heads")
    if not found:
        return not_applicable(id_, PROBES_SECTION, text, paper,
                              "the paper's heads were not looked up (--no-paper-heads) or none was found")
    if raw.get("single") is None:
        return not_applicable(id_, PROBES_SECTION, text, paper, "the single-head effects were not run")
    entry = found.get("specialised")
    if entry is None:
        return not_applicable(id_, PROBES_SECTION, text, paper, "the syntax chapter's heads were not looked up")
    if not entry["heads"]:
        return not_applicable(id_, PROBES_SECTION, text, paper,
                              "no best head of §4.2 clears the syntax chapter's margin over the offset baseline")
    gain, interval, p = entry["delta_gain"], entry["delta_gain_interval"], entry["delta_p_layers"]
    judged = judged_or_undefined(effect, gain, interval, null=0.0, paper=PAPER_HEADS_GAIN, p_value=p,
                                 name="mean percentile above same-layer random sets")
    ours = (f"{len(entry['heads'])} heads past the syntax chapter's margin ({', '.join(entry['heads'])}): mean "
            f"single-head-effect percentile {entry['delta_mean_percentile']:.1f} against "
            f"{entry['delta_expected_percentile']:.1f} for random heads of the same layers (gain "
            f"{gain:+.1f} [{interval[0]:+.1f}, {interval[1]:+.1f}], permutation p = {p:.3g})")
    return claim(id_, PROBES_SECTION, text, paper, ours, entry["delta_mean_percentile"], judged, resampled=RESAMPLED,
                 n=S)


def _sink_judged(entry: dict) -> Judged | Undefined:
    """The no-op claim on the tests of one sink's heads: the no-op test within :data:`NOOP_MAX`, below the matched
    control by :data:`CONTROL_GAP`, and the redirect test above :data:`REDIRECT_MIN`."""
    def make():
        noop, gap, redirect = entry["noop"], entry["control_minus_noop"], entry["redirect"]
        return combined(
            within(noop["relative"], noop["relative_interval"], low=-NOOP_MAX, high=NOOP_MAX,
                   name="removing its value term moves the loss little"),
            effect(gap["relative"], gap["relative_interval"], null=0.0, paper=CONTROL_GAP,
                   name="less than removing a random content token's"),
            effect(redirect["relative"], redirect["relative_interval"], null=0.0, paper=REDIRECT_MIN,
                   name="redirecting the attention moves it much"))
    return judged_or_undefined(make)


def _sink_ours(kind: str, entry: dict) -> str:
    name = SINK_NAMES.get(kind, kind)
    noop, control, redirect = entry["noop"], entry["control"], entry["redirect"]
    text = (f"the {len(entry['heads'])} heads with more than {SINK_SHARE:g} of their attention on {name}, at once: "
            f"no-op {_ci(noop['relative'], noop['relative_interval'])}, a random content token's value term "
            f"{_ci(control['relative'], control['relative_interval'])}, redirect "
            f"{_ci(redirect['relative'], redirect['relative_interval'])} of the loss")
    sp = entry.get("spearman")
    if sp is not None and math.isfinite(sp["rho"]):
        text += (f"; a head's share against its own no-op effect: Spearman rho {sp['rho']:.2f} "
                 f"[{sp['interval'][0]:.2f}, {sp['interval'][1]:.2f}]")
    return text


def _sink_row(id_: str, text: str, paper: str, kind: str, summary: dict, raw: dict, S: int) -> Claim:
    """One sink's no-op claim, judged on that sink's heads where its premise holds."""
    name = SINK_NAMES.get(kind, kind)
    premise = summary.get("sink_premise")
    if premise is None:
        return not_applicable(id_, SINK_SECTION, text, paper, f"the sinks' shares were not read (--no-paper-heads): "
                                                             f"whether {name} is a sink of this model is not known")
    if kind not in premise:
        return not_applicable(id_, SINK_SECTION, text, paper, f"the segments have no {name}")
    if premise[kind]["reason"] is not None:
        return not_applicable(id_, SINK_SECTION, text, paper, premise[kind]["reason"])
    if "sinks" not in raw.get("parts", ()):
        return not_applicable(id_, SINK_SECTION, text, paper, "the sink tests were not run")
    entry = (summary.get("sink_sets") or {}).get(kind)
    if entry is None:
        return not_applicable(id_, SINK_SECTION, text, paper,
                              f"no head puts more than {SINK_SHARE:g} of its attention on {name}")
    return claim(id_, SINK_SECTION, text, paper, _sink_ours(kind, entry), 100 * entry["noop"]["relative"],
                 _sink_judged(entry), resampled=RESAMPLED, n=S)


def _sink_rows(summary: dict, raw: dict, causal: bool, S: int) -> list[Claim]:
    paper = "Clark et al. §3.2 (hypothesis); StreamingLLM for decoders"
    text = "attention to [SEP] is a no-op: removing its value term moves the loss little, redirecting it much"
    if causal:
        sep = not_applicable("ablation-sink-noop", SINK_SECTION, text, paper,
                             "a decoder has no [SEP]; its sink is judged in ablation-sink-noop-measured")
    else:
        sep = _sink_row("ablation-sink-noop", text, paper, "sep", summary, raw, S)
    premise = summary.get("sink_premise")
    measured = None if premise is None else premise["measured"]
    name = "its measured sink" if measured is None else f"its measured sink, {SINK_NAMES.get(measured, measured)}"
    text = (f"attention to the model's sink ({name}) is a no-op: removing its value term moves the loss little, less "
            "than a content token's, and redirecting it much")
    id_ = "ablation-sink-noop-measured"
    if measured == "sep":
        other = not_applicable(id_, SINK_SECTION, text, paper, "the model's measured sink is [SEP]: judged in "
                                                               "ablation-sink-noop")
    elif measured is None:
        other = not_applicable(id_, SINK_SECTION, text, paper,
                               "the sinks' shares were not read (--no-paper-heads): the model's sink is not known")
    else:
        other = _sink_row(id_, text, paper, measured, summary, raw, S)
    return [sep, other]


def claims(summary: dict, raw: dict, *, causal: bool, seed: int = 0, n_boot: int = bootstrap.BOOTSTRAP) -> list[Claim]:
    """The chapter's claims (:data:`IDS`, in that order) from :func:`helpers.ablation.run.summarise` and the run
    (``raw``: its per-sentence losses and sizes); ``seed`` draws the resampled sentence sets."""
    rows = _rows_of(summary, raw, causal, seed, n_boot)
    assert tuple(r.id for r in rows) == IDS
    return rows
