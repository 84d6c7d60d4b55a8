"""The context-mixing chapter's claims (beyond the paper): thresholds as named constants, one verdict rule per
claim, and :func:`claims`, through the one claim model (:mod:`helpers.claims`).

Each claim is a hypothesis the literature suggests and no paper tested with Clark et al.'s probes; its verdict
says whether it holds on this model ("reproduced" = it holds):

- ``mixing-rollout-sinks``: rollout erases the sinks that weights show (attention to [CLS] / BOS and [SEP]);
- ``mixing-vz-heads-norms``: per-head value zeroing is the row-normalised squared norm map (book/methods.md,
  §Context-mixing maps);
- ``mixing-parse``, ``mixing-coref``, ``mixing-probe``: a context-mixing map is a better read-out than the weights
  for §4.2's single-unit parsers, §4.3's antecedent selection and §5's attention-only probe.

>>> rows = claims(scores)                                  # scores: helpers.mixing.run.run_mixing  # doctest: +SKIP
>>> rows[0].id, rows[0].verdict                                                                    # doctest: +SKIP
('mixing-rollout-sinks', 'not reproduced')
"""
from __future__ import annotations

import numpy as np

from helpers.claims import Claim, Verdict, at_most_partly_if_overlaps, not_applicable, verdict
from helpers.mixing.run import HEADS_METHOD, METHOD_NAMES
from helpers.syntax.stats import ALL

# Named thresholds of the verdicts below.
ERASE_RATIO = 0.5      # "erases": rollout's share on the special positions at most half the weights' share
CLOSE_R = 0.95         # "is the squared norm map": median row Pearson r at least this ...
SAME_ARGMAX = 0.9      # ... and the rows' argmax the same in at least this share of rows
PARTLY_R = 0.8         # "partly": median r at least this
IMPROVE_MARGIN = 1.0   # points (accuracy, UAS) by which a map must beat the weights to count as better
WEIGHTS = "attention"  # the paper's map, what every other method is set against
ROLLOUT = "rollout"


def verdict_erases(ratio: float) -> Verdict:
    """Rollout erases the sinks: its share on the special positions is at most :data:`ERASE_RATIO` of the weights'
    (reproduced), or below it at all (partly); an unknown ratio (NaN) is not reproduced."""
    return verdict(ratio <= ERASE_RATIO, ratio < 1)


def verdict_squared_norms(median_r: float, same_argmax: float) -> Verdict:
    """Per-head value zeroing is the squared norm map: median row r at least :data:`CLOSE_R` and the same row argmax
    in at least :data:`SAME_ARGMAX` of the rows (reproduced), or median r at least :data:`PARTLY_R` (partly)."""
    return verdict(median_r >= CLOSE_R and same_argmax >= SAME_ARGMAX, median_r >= PARTLY_R)


def verdict_better(gain: float, interval, weights: float) -> Verdict:
    """A map beats the weights: by at least :data:`IMPROVE_MARGIN` points (reproduced), or by more than 0 (partly);
    "partly" at best when its 95 % ``interval`` holds the weights' score (``None``: no interval, not capped)."""
    v = verdict(gain >= IMPROVE_MARGIN, gain > 0)
    return at_most_partly_if_overlaps(v, interval, weights) if interval is not None else v


def sink_share(result: dict) -> float:
    """A method's mean share (over layers) of every row that goes to the special positions (first and last;
    :func:`helpers.mixing.run.special_shares`); NaN when it has none."""
    share = result.get("special_share") or {}
    parts = [np.asarray(share[k], dtype=np.float64) for k in ("first", "last") if share.get(k) is not None]
    return float(sum(p.mean() for p in parts)) if parts else float("nan")


def compared(results: dict[str, dict]) -> list[str]:
    """The methods set against the weights: every one but the weights, and per-head value zeroing only where it ran
    on every sentence (on its CPU subset its scores are of other sentences)."""
    return [m for m in results if m != WEIGHTS and (m != HEADS_METHOD or results[m].get("subset", {}).get("everything"))]


def _best(results: dict[str, dict], score) -> tuple[str, float, object] | None:
    """``(method, value, interval)`` of the compared method with the highest ``score(result) -> (value, interval)``."""
    found = [(m, *score(results[m])) for m in compared(results)]
    found = [f for f in found if f[1] is not None]
    return max(found, key=lambda f: f[1]) if found else None


def _syntax(r: dict):
    row = r.get("syntax", {}).get("relations", {}).get(ALL)
    return (row["held_out_accuracy"], row["held_out_ci"]) if row else (None, None)


def _coref(r: dict):
    c = r.get("coref") or {}
    return c.get("accuracy"), c.get("interval")


def _probe(r: dict):
    p = r.get("probe")
    return (p["mean"], None) if p else (None, None)


BETTER = (  # id, section, what is read, the score, its unit
    ("mixing-parse", "beyond §4.2", "single-unit parser, all relations (held out)", _syntax, "%"),
    ("mixing-coref", "beyond §4.3", "antecedent selection (held out)", _coref, "%"),
    ("mixing-probe", "beyond §5", "attention-only probe (UAS, mean over seeds)", _probe, ""),
)


def claims(results: dict[str, dict]) -> list[Claim]:
    """The chapter's claims from :func:`helpers.mixing.run.run_mixing`'s ``{method: scores}``; a claim whose methods
    were not run is left out."""
    out = []
    if WEIGHTS in results and ROLLOUT in results:
        w, r = sink_share(results[WEIGHTS]), sink_share(results[ROLLOUT])
        ratio = r / w if w > 0 else float("nan")
        out.append(Claim("mixing-rollout-sinks", "beyond §3.2", "rollout erases the sinks ([CLS] / BOS, [SEP]) that weights show",
                         "Abnar & Zuidema (2020): rollout corrects for the residual; not tested on sinks",
                         f"share on the special positions {w:.2f} under weights, {r:.2f} under rollout (ratio {ratio:.2f})",
                         ratio, verdict_erases(ratio)))
    squared = results.get(HEADS_METHOD, {}).get("squared_norms")
    if squared and squared.get("median_r") is not None and "norms" in results:
        r, same = squared["median_r"], squared["same_argmax"]
        out.append(Claim("mixing-vz-heads-norms", "beyond §3.2", "per-head value zeroing is the row-normalised squared norm map",
                         "a small check (5 sentences): median r 0.999, the same row argmax in 95 % of rows",
                         f"median r {r:.3f}, the same row argmax in {100 * same:.1f} % of {squared['rows']} rows",
                         r, verdict_squared_norms(r, same)))
    if WEIGHTS not in results:
        return out
    for claim_id, section, what, score, unit in BETTER:
        weights, _ = score(results[WEIGHTS])
        best = _best(results, score)
        if weights is None or best is None:  # nothing scored at these sizes (e.g. no mention in a small run's documents)
            out.append(not_applicable(claim_id, section, f"a context-mixing map is a better {what} than the weights",
                                      "not tested (weights only)",
                                      f"no {what} was scored {'for the weights' if weights is None else 'for any other map'}"
                                      " at these sizes"))
            continue
        method, value, interval = best
        gain = value - weights
        out.append(Claim(claim_id, section, f"a context-mixing map is a better {what} than the weights",
                         "not tested (weights only)",
                         f"best: {METHOD_NAMES[method]} {value:.1f}{unit} against {weights:.1f}{unit} for weights "
                         f"({gain:+.1f} points)", gain, verdict_better(gain, interval, weights)))
    return out
