"""The ablation chapter's claims (beyond the paper): thresholds as named constants, one verdict rule per claim, and
:func:`claims`, through the one claim model (:mod:`helpers.claims`). Each claim is a finding of the papers that
removed heads (Michel et al. 2019; Voita et al. 2019; StreamingLLM, Xiao et al. 2024) or Clark et al.'s §3.2
hypothesis, tested on this model; "reproduced" = it holds here.

- ``ablation-single-heads``: most single heads can be removed at little cost (Michel §3.2);
- ``ablation-one-head-layers``: many layers keep the loss with one head (Michel §3.3);
- ``ablation-pruning``: pruned by importance, a large share of heads goes before the loss rises, and importance order
  beats random order (Michel §4);
- ``ablation-paper-heads``: the heads the paper's probes find matter more than random heads (Voita);
- ``ablation-sink-noop``: attention to [SEP] (a decoder: BOS) is a no-op: the no-op test moves the loss little where
  the redirect test moves it much (Clark §3.2; StreamingLLM);
- ``ablation-importance-ranks``: Michel's importance ranks heads as their removal does (Spearman, with an interval).

>>> rows = claims(summary, raw)                                      # doctest: +SKIP
"""
from __future__ import annotations

import math

from helpers.claims import Claim, Verdict, not_applicable, verdict

SECTION = "beyond the paper"  # Michel et al.'s findings, tested on this model
PROBES_SECTION = "beyond §4"  # the heads of the paper's probes (§3, §4.2, §4.3)
SINK_SECTION = "beyond §3.2"  # Clark et al.'s "no-op" reading of attention to [SEP]
# Named thresholds of the verdicts below (losses relative to the full model's mean loss).
LITTLE_COST = 0.01      # a head removed "at little cost": the loss rises by at most 1 % of the full model's
MOST = 0.5              # "most" heads: more than half ...
SOME = 0.25             # ... "partly": at least a quarter
ONE_HEAD_COST = 0.05    # a layer "keeps the loss" with one head: its best single head costs at most 5 %
MANY_LAYERS = 0.5       # "many layers": at least half of them (partly: at least one)
PRUNE_RISE = 0.05       # the loss "rises" past 5 % above the full model's along the pruning curve
LARGE_SHARE = 0.2       # "a large share": at least 20 % of the heads (Michel: 20 % WMT, 40 % BERT)
P_VALUE = 0.05          # the paper's heads "matter more": permutation p below this ...
ABOVE_MEDIAN = 50.0     # ... "partly": their mean percentile above the median
NOOP_MAX = 0.01         # the no-op test "moves the loss little": at most 1 % of the full model's loss ...
REDIRECT_RATIO = 5.0    # ... where the redirect test moves it at least 5 times as much ...
REDIRECT_MIN = 0.02     # ... and at least 2 % of the loss ("much": not two changes that are both tiny)
RHO_STRONG = 0.5        # importance "ranks heads as removal does": Spearman's rho at least this, interval above 0


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def verdict_single(share_little: float) -> Verdict:
    """Most heads cost little: the share of heads whose removal raises the loss by at most :data:`LITTLE_COST`
    (relative) exceeds :data:`MOST` (reproduced), or is at least :data:`SOME` (partly)."""
    return verdict(share_little > MOST, share_little >= SOME)


def verdict_one_head(share_layers: float) -> Verdict:
    """Many layers keep the loss with one head: at least :data:`MANY_LAYERS` of the layers (reproduced), or any
    (partly), have a head whose sole presence costs at most :data:`ONE_HEAD_COST`."""
    return verdict(share_layers >= MANY_LAYERS, share_layers > 0)


def verdict_pruning(share_before_rise: float, beats_random: bool) -> Verdict:
    """Pruning by importance: at least :data:`LARGE_SHARE` of the heads go before the loss rises by
    :data:`PRUNE_RISE`, and importance order's mean loss over the steps is below random order's (reproduced); one of
    the two (partly)."""
    large = share_before_rise >= LARGE_SHARE
    return verdict(large and beats_random, large or beats_random)


def verdict_paper_heads(p_value: float, mean_percentile: float) -> Verdict:
    """The paper's heads matter more than random heads: the permutation p of their mean single-head effect below
    :data:`P_VALUE` (reproduced), or their mean percentile above :data:`ABOVE_MEDIAN` (partly)."""
    return verdict(p_value < P_VALUE, mean_percentile > ABOVE_MEDIAN)


def verdict_noop(noop: float, redirect: float) -> Verdict:
    """Attention to the sink is a no-op: the no-op test's relative change is at most :data:`NOOP_MAX` in size and the
    redirect test's at least :data:`REDIRECT_RATIO` times larger and at least :data:`REDIRECT_MIN` (reproduced);
    redirect larger than no-op at all (partly)."""
    small, large = abs(noop), abs(redirect)
    return verdict(small <= NOOP_MAX and large >= max(REDIRECT_RATIO * small, REDIRECT_MIN), large > small)


def verdict_ranks(rho: float, lo: float) -> Verdict:
    """Importance ranks heads as removal does: rho at least :data:`RHO_STRONG` with the interval above 0 (reproduced);
    the interval above 0 (partly)."""
    return verdict(rho >= RHO_STRONG and lo > 0, lo > 0)


def claims(summary: dict, raw: dict, *, causal: bool) -> list[Claim]:
    """The chapter's claims from :func:`helpers.ablation.run.summarise` and the run (``raw``: sizes, parts)."""
    rows = []
    base = summary["base_loss"]
    sec = SECTION

    claim = "most single heads can be removed at little cost"
    paper = "Michel et al. §3.2: most heads, no significant change"
    if summary["delta_relative"] is None:
        rows.append(not_applicable("ablation-single-heads", sec, claim, paper, "the single-head effects were not run"))
    else:
        rel = [x for row in summary["delta_relative"] for x in row]
        share = sum(1 for x in rel if x <= LITTLE_COST) / len(rel)
        rows.append(Claim("ablation-single-heads", sec, claim, paper,
                          f"{_pct(share)} of heads cost at most {_pct(LITTLE_COST)} of the loss ({raw['segments']} "
                          "sentences)", 100 * share, verdict_single(share)))

    claim = "many layers keep the loss with one head"
    paper = "Michel et al. §3.3: many layers reduced to one head"
    if raw["n_heads"] < 2:
        rows.append(not_applicable("ablation-one-head-layers", sec, claim, paper, "the model has one head per layer"))
    elif summary["only_layer_min"] is None:
        rows.append(not_applicable("ablation-one-head-layers", sec, claim, paper, "all but one was not run"))
    else:
        mins = [x / base for x in summary["only_layer_min"]]
        share = sum(1 for x in mins if x <= ONE_HEAD_COST) / len(mins)
        rows.append(Claim("ablation-one-head-layers", sec, claim, paper,
                          f"{sum(1 for x in mins if x <= ONE_HEAD_COST)} of {len(mins)} layers within "
                          f"{_pct(ONE_HEAD_COST)} with their best head alone ({raw['detail_segments']} sentences)",
                          100 * share, verdict_one_head(share)))

    claim = "pruned by importance, a large share of heads goes before the loss rises, and importance beats random order"
    paper = "Michel et al. §4: about 40 % of BERT's heads (20 % WMT)"
    prune = summary["prune"]
    if prune is None:
        rows.append(not_applicable("ablation-pruning", sec, claim, paper, "the pruning curve was not run"))
    else:
        from helpers.ablation.stats import largest_share_within

        share = largest_share_within(prune["shares"], prune["importance"], base * (1 + PRUNE_RISE))
        inner = slice(1, len(prune["shares"]) - 1)  # the steps between nothing and everything removed
        mine = sum(prune["importance"][inner]) / max(1, len(prune["importance"][inner]))
        rand = sum(prune["random_mean"][inner]) / max(1, len(prune["random_mean"][inner]))
        beats = mine < rand
        rows.append(Claim("ablation-pruning", sec, claim, paper,
                          f"{_pct(share)} of heads pruned within {_pct(PRUNE_RISE)} of the loss; mean loss over the "
                          f"steps {mine:.3f} by importance vs {rand:.3f} random", 100 * share,
                          verdict_pruning(share, beats)))

    claim = "the heads the paper's probes find matter more than random heads"
    paper = "Voita et al.: specialised heads are the last pruned"
    ph = (summary.get("paper_heads") or {}).get("all")
    if ph is None or ph.get("delta_p") is None:
        why = "no paper head was found" if ph is None else "the single-head effects were not run"
        if not summary.get("paper_heads") and ph is None:
            why = "the paper's heads were not looked up (--no-paper-heads) or none was found"
        rows.append(not_applicable("ablation-paper-heads", PROBES_SECTION, claim, paper, why))
    else:
        rows.append(Claim("ablation-paper-heads", PROBES_SECTION, claim, paper,
                          f"{len(ph['heads'])} heads, mean single-head effect percentile "
                          f"{ph['delta_mean_percentile']:.1f}, permutation p = {ph['delta_p']:.3g}",
                          ph["delta_mean_percentile"], verdict_paper_heads(ph["delta_p"], ph["delta_mean_percentile"])))

    sink = "bos" if causal else "sep"
    name = "BOS" if causal else "[SEP]"
    claim = f"attention to {name} is a no-op: removing its value term moves the loss little, redirecting it much"
    paper = "Clark et al. §3.2 (hypothesis); StreamingLLM for decoders"
    tests = (summary.get("sinks") or {}).get(sink)
    if tests is None or tests["noop"]["all"] is None:
        if summary.get("sinks") is None:
            why = "the sink tests were not run"
        elif tests is None:
            why = f"the segments have no {name}"
        else:  # per head only (--parts sink_heads): the claim is about every head at once
            why = "the sink tests on every head at once were not run"
        rows.append(not_applicable("ablation-sink-noop", SINK_SECTION, claim, paper, why))
    else:
        noop, redirect = tests["noop"]["all"] / base, tests["redirect"]["all"] / base
        ours = f"every head at once: no-op {noop:+.2%}, redirect {redirect:+.2%} of the loss"
        cls = (summary.get("sinks") or {}).get("cls")
        if not causal and cls is not None and cls["noop"]["all"] is not None:  # an encoder's other sink, said beside
            ours += (f" ([CLS], not judged here: no-op {cls['noop']['all'] / base:+.2%}, redirect "
                     f"{cls['redirect']['all'] / base:+.2%})")
        rows.append(Claim("ablation-sink-noop", SINK_SECTION, claim, paper, ours, 100 * noop,
                          verdict_noop(noop, redirect)))

    claim = "Michel's importance ranks heads as their actual removal does"
    paper = "Michel et al. §4 (importance as a proxy for removal)"
    sp = summary.get("spearman")
    if sp is None or not math.isfinite(sp["rho"]):
        why = ("importance or the single-head effects were not run" if sp is None
               else "importance or the single-head effect is the same for every head: no ranks to compare")
        rows.append(not_applicable("ablation-importance-ranks", sec, claim, paper, why))
    else:
        lo, hi = sp["interval"]
        rows.append(Claim("ablation-importance-ranks", sec, claim, paper,
                          f"Spearman rho {sp['rho']:.2f} [{lo:.2f}, {hi:.2f}]", sp["rho"], verdict_ranks(sp["rho"], lo)))
    return rows
