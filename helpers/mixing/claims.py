"""The context-mixing chapter's claims (beyond the paper): thresholds as named constants, one rule of
:mod:`helpers.claims` per claim, and :func:`claims`.

Each claim is a hypothesis the literature suggests and no paper tested with Clark et al.'s probes; its verdict
says whether it holds on this model ("reproduced" = it holds). No paper states a level for any of them: every
level below is ours, named as such in the claim's ``paper`` text.

- ``mixing-rollout-sinks`` (rule ``effect``): rollout erases the sinks that weights show (attention to [CLS] / BOS
  and [SEP]): the ratio of rollout's share on the special positions to the weights', on the same GUM test
  sentences, with its interval over those sentences; null :data:`NO_CHANGE`, level :data:`ERASE_RATIO` (ours);
- ``mixing-vz-heads-norms`` (rule ``combined`` of two ``within``): per-head value zeroing is the row-normalised
  squared norm map (book/methods.md, §Context-mixing maps): the median row r in ``[CLOSE_R, 1]`` and the share of
  rows with the same argmax in ``[SAME_ARGMAX, 1]``, each with its interval over the sentences compared;
- ``mixing-parse``, ``mixing-coref``, ``mixing-probe`` (rule ``effect``): a context-mixing map is a better read-out
  than the weights for §4.2's single-unit parsers, §4.3's antecedent selection and §5's attention-only probe. The
  map is the one with the best *dev* score (:func:`helpers.mixing.stats.choose_on_dev`), scored on test, where it
  was not chosen; its gain over the weights is paired on the same test items (sentences; documents, their mentions
  pooled; sentences within each probe seed, the seeds pooled), null 0, level :data:`IMPROVE_MARGIN` (ours).

A claim whose statistic is undefined at these sizes (NaN, no interval, nothing scored, fewer than
:data:`MIN_UNITS` units to resample) is not applicable, with its reason.

>>> rows = claims(scores)                                  # scores: helpers.mixing.run.run_mixing  # doctest: +SKIP
>>> rows[0].id, rows[0].verdict                                                                    # doctest: +SKIP
('mixing-rollout-sinks', 'not reproduced')
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from helpers.claims import Claim, Judged, Undefined, claim, combined, effect, judged_or_undefined, not_applicable, within
from helpers.mixing.run import HEADS_METHOD, METHOD_NAMES
from helpers.mixing.stats import choose_on_dev, paired_gain, paired_ratio, pooled_gain
from helpers.syntax.stats import ALL

# Named thresholds of the verdicts below (all ours: no paper states a level for these claims).
ERASE_RATIO = 0.5      # "erases": rollout's share on the special positions at most half the weights' share ...
NO_CHANGE = 1.0        # ... against the null of no change (the ratio 1)
CLOSE_R = 0.95         # "is the squared norm map": median row Pearson r in [CLOSE_R, 1] ...
SAME_ARGMAX = 0.9      # ... and the rows' argmax the same in a share of rows in [SAME_ARGMAX, 1]
IMPROVE_MARGIN = 1.0   # points (accuracy, UAS) by which a map must beat the weights to count as better ...
NO_GAIN = 0.0          # ... against the null of no gain
MIN_UNITS = 2          # an interval resamples at least this many units (over one unit it has no width: no verdict)
WEIGHTS = "attention"  # the paper's map, what every other method is set against
ROLLOUT = "rollout"


def judge_erases(ratio: float, interval) -> Judged:
    """Rollout erases the sinks (rule ``effect``): the ratio of its share on the special positions to the weights',
    with its 95 % ``interval``, against the null :data:`NO_CHANGE` and our level :data:`ERASE_RATIO` (below the
    null: the interval below 1 and the ratio at most 0.5 is reproduced). Raises :class:`Undefined` on a NaN ratio
    or without an interval."""
    return effect(ratio, interval, null=NO_CHANGE, paper=ERASE_RATIO, name="the ratio of the shares on the special "
                                                                          "positions")


def judge_squared_norms(median_r: float, r_interval, same_argmax: float, same_interval) -> Judged:
    """Per-head value zeroing is the squared norm map (rule ``combined``): the median row r within ``[CLOSE_R,
    1]`` and the share of rows with the same argmax within ``[SAME_ARGMAX, 1]``, each by its 95 % interval
    (:func:`helpers.claims.within`). Raises :class:`Undefined` on a NaN or a missing interval."""
    return combined(within(median_r, r_interval, low=CLOSE_R, high=1.0, name="median row r"),
                    within(same_argmax, same_interval, low=SAME_ARGMAX, high=1.0, name="share of rows with the same argmax"))


def judge_better(gain: float, interval) -> Judged:
    """A map beats the weights (rule ``effect``): its paired gain in points with its 95 % ``interval``, against
    the null :data:`NO_GAIN` and our level :data:`IMPROVE_MARGIN` (the interval above 0 and a gain of at least
    the margin: reproduced; above 0 and less: partly; an interval that holds 0: inconclusive where it reaches the
    margin, else not reproduced). Raises :class:`Undefined` on a NaN or without an interval."""
    return effect(gain, interval, null=NO_GAIN, paper=IMPROVE_MARGIN, name="the gain over the weights")


def too_few(n: int | None, unit: str) -> Undefined | None:
    """The :class:`Undefined` of an interval over fewer than :data:`MIN_UNITS` resampled ``unit`` (one unit drawn
    again and again gives an interval of no width, which would pass for certainty), else ``None``."""
    if n is None or n >= MIN_UNITS:
        return None
    return Undefined(f"{n} {_plural(n, unit)} to resample at these sizes: an interval needs at least {MIN_UNITS}")


def _plural(n: int, unit: str) -> str:
    return unit if n != 1 else unit.rstrip("s")


def sink_share(result: dict) -> float:
    """A method's mean share (over layers) of every row that goes to the special positions (first and last;
    :func:`helpers.mixing.run.special_shares`); NaN when it has none."""
    share = result.get("special_share") or {}
    parts = [np.asarray(share[k], dtype=np.float64) for k in ("first", "last") if share.get(k) is not None]
    return float(sum(p.mean() for p in parts)) if parts else float("nan")


def compared(results: dict[str, dict]) -> list[str]:
    """The methods set against the weights, in the results' order: every one but the weights, and per-head value
    zeroing only where it ran on every sentence (on its CPU subset its scores are of other sentences)."""
    return [m for m in results if m != WEIGHTS and (m != HEADS_METHOD or results[m].get("subset", {}).get("everything"))]


@dataclass(frozen=True)
class Probe:
    """How a "better read-out" claim reads one method's scores: ``dev`` and ``test`` (the dev score the map is
    chosen by, the test score it is judged by), ``items`` (the per-item counts of the test score,
    :mod:`helpers.mixing.stats`), ``gain`` (the paired gain and its interval from two methods' items), the
    resampled unit and the score's unit."""

    id: str
    section: str
    what: str
    dev: Callable[[dict], float | None]
    test: Callable[[dict], float | None]
    items: Callable[[dict], dict | None]
    gain: Callable[[dict, dict], tuple]
    resampled: str
    unit: str


def _all(r: dict) -> dict:
    return r.get("syntax", {}).get("relations", {}).get(ALL) or {}


def _probe_dev(r: dict) -> float | None:
    p = r.get("probe")
    return float(np.mean(p["dev"])) if p and p.get("dev") else None


BETTER = (
    Probe("mixing-parse", "beyond §4.2", "single-unit parser, all relations (held out)",
          lambda r: _all(r).get("dev_accuracy"), lambda r: _all(r).get("held_out_accuracy"),
          lambda r: r.get("syntax", {}).get("per_sentence"), paired_gain, "sentences", " %"),
    Probe("mixing-coref", "beyond §4.3", "antecedent selection (held out)",
          lambda r: (r.get("coref") or {}).get("dev_accuracy"), lambda r: (r.get("coref") or {}).get("accuracy"),
          lambda r: (r.get("coref") or {}).get("per_document"), paired_gain, "documents", " %"),
    Probe("mixing-probe", "beyond §5", "attention-only probe (UAS, mean over seeds)",
          _probe_dev, lambda r: (r.get("probe") or {}).get("mean"),
          lambda r: (r.get("probe") or {}).get("per_sentence"), pooled_gain, "sentences", ""),
)


def _better(results: dict[str, dict], p: Probe) -> Claim:
    """One "better read-out" claim: the compared map chosen on dev, its test score against the weights' on the
    same test items, the paired gain with its interval (:func:`judge_better`)."""
    text = f"a context-mixing map is a better {p.what} than the weights"
    paper = f"not tested (weights only); \"better\": a gain of at least {IMPROVE_MARGIN:g} point is our level"
    weights = p.test(results[WEIGHTS])
    chosen = choose_on_dev([m for m in compared(results) if p.test(results[m]) is not None],
                           lambda m: p.dev(results[m]))
    if weights is None or chosen is None:  # nothing scored at these sizes (e.g. no mention in a small run's documents)
        return not_applicable(p.id, p.section, text, paper,
                              f"no {p.what} was scored {'for the weights' if weights is None else 'for any other map'}"
                              " at these sizes")
    mine, ours_items, their_items = p.test(results[chosen]), p.items(results[chosen]), p.items(results[WEIGHTS])
    gain = mine - weights
    if ours_items is None or their_items is None:
        return not_applicable(p.id, p.section, text, paper, "no per-item scores to pair the two maps on")
    try:
        _, interval = p.gain(ours_items, their_items)
    except ValueError as exc:  # scored on different items: no paired comparison
        return not_applicable(p.id, p.section, text, paper, str(exc))
    n = len(their_items["units"])
    judged = too_few(n, p.resampled) or judged_or_undefined(judge_better, gain, interval)
    if isinstance(judged, Undefined):
        return claim(p.id, p.section, text, paper, "", None, judged, resampled=None, n=None)
    seeds = len(their_items["correct"]) if p.id == "mixing-probe" else None
    within = f" within each of {seeds} {_plural(seeds, 'seeds')}, pooled" if seeds else ""
    ours = (f"chosen on dev: {METHOD_NAMES[chosen]} ({p.dev(results[chosen]):.1f} on dev against the weights' "
            f"{_text(p.dev(results[WEIGHTS]))}); on test {mine:.1f}{p.unit} against the weights' {weights:.1f}{p.unit}: "
            f"a gain of {gain:+.1f} points [{interval[0]:+.1f}, {interval[1]:+.1f}] (paired, {n} test "
            f"{_plural(n, p.resampled)} resampled{within})")
    return claim(p.id, p.section, text, paper, ours, gain, judged, resampled=p.resampled, n=n)


def _text(x) -> str:
    return "—" if x is None else f"{x:.1f}"


def _rollout_sinks(results: dict[str, dict]) -> Claim:
    text = "rollout erases the sinks ([CLS] / BOS, [SEP]) that weights show"
    paper = (f"Abnar & Zuidema (2020): rollout corrects for the residual; not tested on sinks. \"Erases\": at most "
             f"{ERASE_RATIO:g} of the weights' share is our level")
    w, r = sink_share(results[WEIGHTS]), sink_share(results[ROLLOUT])
    ratio = r / w if w > 0 else float("nan")
    ws, rs = results[WEIGHTS].get("special_share_sentences"), results[ROLLOUT].get("special_share_sentences")
    interval, n = None, None
    if ws and rs and ws["units"] == rs["units"]:
        _, interval = paired_ratio(rs["share"], ws["share"])
        n = len(ws["units"])
    judged = too_few(n, "sentences") or judged_or_undefined(judge_erases, ratio, interval)
    ci = "" if interval is None else f" [{interval[0]:.2f}, {interval[1]:.2f}] over {n} test sentences resampled"
    return claim("mixing-rollout-sinks", "beyond §3.2", text, paper,
                 f"share on the special positions {w:.2f} under weights, {r:.2f} under rollout: a ratio of "
                 f"{ratio:.2f}{ci}", ratio, judged, resampled="sentences", n=n)


def _vz_heads_norms(squared: dict) -> Claim:
    r, same = squared["median_r"], squared.get("same_argmax")
    r_ci, same_ci = squared.get("median_r_interval"), squared.get("same_argmax_interval")
    n = squared.get("sentences")
    judged = too_few(n, "sentences") or judged_or_undefined(judge_squared_norms, r, r_ci, np.nan if same is None else same,
                                                            same_ci)
    if r_ci is not None and same_ci is not None and same is not None:
        ours = (f"median r {r:.3f} [{r_ci[0]:.3f}, {r_ci[1]:.3f}], the same row argmax in {100 * same:.1f} % "
                f"[{100 * same_ci[0]:.1f}, {100 * same_ci[1]:.1f}] of {squared['rows']} rows ({n} sentences resampled)")
    else:
        ours = f"median r {r:.3f} of {squared['rows']} rows"
    return claim("mixing-vz-heads-norms", "beyond §3.2", "per-head value zeroing is the row-normalised squared norm map",
                 f"a small check (5 sentences): median r 0.999, the same row argmax in 95 % of rows. \"Is\": a median "
                 f"r of at least {CLOSE_R:g} and the same argmax in at least {100 * SAME_ARGMAX:g} % of rows is our level",
                 ours, r, judged, resampled="sentences", n=n)


def claims(results: dict[str, dict]) -> list[Claim]:
    """The chapter's claims from :func:`helpers.mixing.run.run_mixing`'s ``{method: scores}``; a claim whose methods
    were not run is left out."""
    out = []
    if WEIGHTS in results and ROLLOUT in results:
        out.append(_rollout_sinks(results))
    squared = results.get(HEADS_METHOD, {}).get("squared_norms")
    if squared and squared.get("median_r") is not None and "norms" in results:
        out.append(_vz_heads_norms(squared))
    if WEIGHTS not in results:
        return out
    return out + [_better(results, p) for p in BETTER]
