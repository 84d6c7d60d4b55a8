"""Paper §5's claims: thresholds as named constants, one rule of :mod:`helpers.claims` per claim, and :func:`claims`.

Every interval resamples the test sentences within each seed and pools the seeds' replicates
(:func:`~helpers.probe.stats.pooled_uas_replicates`): the sampling of the sentences and the spread over trainings
in one interval. Two probes scored on the same sentences are compared on the same draws, seed by seed (paired).
"""
from __future__ import annotations

import numpy as np

from helpers import paper
from helpers.claims import Claim, Judged, claim, combined, effect, interval_text, judged_or_undefined, not_applicable
from helpers.core.bootstrap import BOOTSTRAP, percentile_interval
from helpers.probe.stats import pooled_uas_gain, pooled_uas_replicates

# Thresholds of the §5 verdicts (see :func:`claims`).
PAPER_SECTION = "§5"  # the paper section of these claims (the record's ``paper``)
# Ours: UAS points that count as "far better" / "substantially outperforms" / "does poorly" (the paper states no
# number; its gaps are 16-47 points).
PROBE_GAIN = 10
NO_GAIN = 0.0          # the null of a difference between two probes on the same sentences
CLAIM_TEST = "test"    # the test set the verdicts rest on: GUM test, in the domain the probes were trained on
RESAMPLED = "sentences"  # test sentences, resampled within each seed, the seeds pooled
# The probes the claims read (the rows of helpers.probe.run.run_probes)
RIGHT_BRANCHING, ATTN, ATTN_WORDS, DISTANCES_WORDS, RANDOM_INIT = (
    "Right-branching", "Attn", "Attn + words", "Distances + words", "Random-init Attn + words")


def judge_gain(gain: float, interval, *, name: str | None = None) -> Judged:
    """§5, one comparison of two probes on the same sentences (rule ``effect``, null 0): the first beats the second
    by at least :data:`PROBE_GAIN` UAS points (``gain`` and its pooled, paired 95 % ``interval``)."""
    return effect(gain, interval, null=NO_GAIN, paper=PROBE_GAIN, name=name)


def judge_attn_words_best(over_attn: float, over_attn_interval, over_distances: float,
                          over_distances_interval) -> Judged:
    """§5 (rule ``combined``): attention-and-words beats attention-only and beats distances-and-words, each by at
    least :data:`PROBE_GAIN` points (:func:`judge_gain` twice)."""
    return combined(judge_gain(over_attn, over_attn_interval, name=f"gain over {ATTN}"),
                    judge_gain(over_distances, over_distances_interval, name=f"gain over {DISTANCES_WORDS}"))


def gain(result: dict, probe: str, baseline: str | None = None, *, test: str = CLAIM_TEST, n_boot: int = BOOTSTRAP,
         seed: int = 0) -> dict:
    """``probe``'s UAS on ``test`` (with ``baseline``: minus ``baseline``'s on the same sentences, seed by seed) from
    :func:`~helpers.probe.run.run_probes`'s ``result``: ``{"estimate", "interval", "sentences"}``, the estimate the
    mean over seeds, the 95 % interval of the pooled replicates (:func:`~helpers.probe.stats.pooled_uas_replicates`).
    Raises ``KeyError`` when the result holds no per-sentence counts for them."""
    per = result["per_sentence"]
    total = np.asarray(per["totals"][test])
    correct = per["correct"][probe][test]
    base = None if baseline is None else per["correct"][baseline][test]
    replicates = pooled_uas_replicates(correct, total, baseline=base, n_boot=n_boot, seed=seed)
    return {"estimate": pooled_uas_gain(correct, total, base), "interval": percentile_interval(replicates),
            "sentences": int(len(total))}


def claims(result: dict) -> list[Claim]:
    """The §5 claims from :func:`run_probes`'s result, on GUM test (:data:`CLAIM_TEST`), each verdict from its
    rule above, on pooled intervals over test sentences and seeds (paired where two probes are compared)."""
    rows = result["rows"]
    runs = {name: r[CLAIM_TEST]["runs"] for name, r in rows.items() if CLAIM_TEST in r}
    m = {name: float(np.mean(v)) for name, v in runs.items()}
    p = paper.table3  # the paper's UAS for our probe of that name
    specs = [("probe-attn-over-right-branching", "attention-only probe parses far better than right-branching",
              f"{p(ATTN)} vs {p(RIGHT_BRANCHING)} UAS", ATTN, (RIGHT_BRANCHING,)),
             ("probe-attn-words-best", "attention-and-words probe beats attention-only and distances-and-words",
              f"{p(ATTN_WORDS)} vs {p(ATTN)} and {p(DISTANCES_WORDS)} UAS", ATTN_WORDS, (ATTN, DISTANCES_WORDS)),
             ("probe-random-init-fails", "random-init attention makes the probe fail",
              f"{p(RANDOM_INIT)} vs {p(ATTN_WORDS)} UAS", RANDOM_INIT, (ATTN_WORDS,))]
    out = []
    for claim_id, text, p_text, shown, others in specs:
        missing = [name for name in (shown, *others) if name not in runs]
        if missing:
            out.append(not_applicable(claim_id, PAPER_SECTION, text, p_text, f"no {', '.join(missing)} run on GUM test"))
            continue
        try:
            own = gain(result, shown)
            if claim_id == "probe-random-init-fails":  # trained minus random-init, on the same sentences
                diffs = [gain(result, ATTN_WORDS, RANDOM_INIT)]
            else:
                diffs = [gain(result, shown, other) for other in others]
        except KeyError:
            out.append(not_applicable(claim_id, PAPER_SECTION, text, p_text,
                                      "the probes' result holds no per-sentence scores of GUM test to resample"))
            continue
        n_seeds = len(runs[shown])
        where = f"UAS, GUM test, {n_seeds} seed{'s' if n_seeds != 1 else ''}"
        shown_diffs = " and ".join(f"{d['estimate']:+.1f} [{d['interval'][0]:+.1f}, {d['interval'][1]:+.1f}]"
                                   for d in diffs)
        vs = " and ".join(f"{m[o]:.1f}" for o in others)
        ours = f"{interval_text(m[shown], own['interval'])} vs {vs} ({where}); difference {shown_diffs}"
        if claim_id == "probe-attn-words-best":
            judged = judged_or_undefined(lambda: judge_attn_words_best(diffs[0]["estimate"], diffs[0]["interval"],
                                                                       diffs[1]["estimate"], diffs[1]["interval"]))
        else:
            name = f"gain over {others[0]}" if claim_id != "probe-random-init-fails" else f"{ATTN_WORDS} minus {RANDOM_INIT}"
            judged = judged_or_undefined(judge_gain, diffs[0]["estimate"], diffs[0]["interval"], name=name)
        out.append(claim(claim_id, PAPER_SECTION, text, p_text, ours, m[shown], judged, resampled=RESAMPLED,
                         n=own["sentences"]))
    return out
