"""What holds across models (chapter "Comparing models"): the claims grouped by the pre-trained models' verdicts,
each model's verdicts counted, and which claims the random-init controls reproduce too, judged on the
trained-minus-random difference. Definitions: book/methods.md, §Verdicts across models.

No verdict is made here: each model's verdict is its chapter's (:func:`helpers.results.all_claims`). Two things
are read off them:

- **Groups.** A claim is *shared* when every pre-trained model it applies to gives "reproduced"; *model-dependent*
  when some do and others do not; reproduced by *none* otherwise. "Partly" and "inconclusive" are not
  "reproduced": they are counted as themselves, per model (:attr:`Findings.partly`, :attr:`Findings.inconclusive`).
  A claim not applicable to a model leaves that model out of it.
- **Random too.** A random-init control (SPEC ``random:X``) reproduces a claim too when its own verdict is
  "reproduced" or "partly" *and* pre-training is not shown to add to it: the difference ``X`` minus control of the
  judged statistic (:func:`difference`, a 95 % interval from the two rows' intervals) does not exclude 0 on the
  claim's side (:func:`helpers.claims.judge` on the difference, with null 0 and the claim's own effect size as
  its level, gives neither "reproduced" nor "partly"); for a "within" claim, which has no side, the difference's
  interval holds 0. Where the two rows carry no interval on a common scale (a share, a legacy row, a
  permutation p alone, no pre-trained ``X`` among the models), the control's own verdict is all there is: such
  claims are listed apart (:attr:`Findings.random_own_verdict`), never mixed with those tested on the difference.

>>> lo, hi = difference_interval(5.0, (4.0, 6.0), 2.0, (1.0, 3.0))   # half-widths 1 and 1 in quadrature
>>> round(lo, 4), round(hi, 4)
(1.5858, 4.4142)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Sequence

from helpers.claims import INCONCLUSIVE, NOT_APPLICABLE, PARTLY, REPRODUCED, VERDICTS, Judged, Verdict, by_id, judge
from helpers.compare.run import parse_spec

if TYPE_CHECKING:
    from helpers.compare.run import ModelResult

HOLDS_TOO = (REPRODUCED, PARTLY)  # a control's own verdicts that say it shows the claimed pattern
Basis = Literal["difference", "own verdict"]


# ----------------------------------------------------------------------------------- the difference


def difference_interval(trained: float, trained_interval: Sequence[float], random: float,
                        random_interval: Sequence[float]) -> tuple[float, float]:
    """The 95 % interval of ``trained - random`` from two independent estimates' 95 % intervals: each side's
    half-widths combined in quadrature (the "method of variance estimates recovery", Zou and Donner, 2008):
    ``lo = d - sqrt((trained - t_lo)^2 + (r_hi - random)^2)``, ``hi = d + sqrt((t_hi - trained)^2 + (random -
    r_lo)^2)`` with ``d = trained - random``. For two normal estimates it is the exact interval of their difference;
    for the percentile intervals of bootstraps it is an approximation. The two models of a comparison read
    overlapping items (the same segments' seed, the same treebanks), so their estimates, if correlated at all, are
    correlated positively, and the true interval of the difference is then narrower: this one errs on the wide
    (conservative) side. An estimate outside its own interval counts that side's half-width as 0."""
    t_lo, t_hi = (float(x) for x in trained_interval)
    r_lo, r_hi = (float(x) for x in random_interval)
    d = float(trained) - float(random)
    below = math.hypot(max(trained - t_lo, 0.0), max(r_hi - random, 0.0))
    above = math.hypot(max(t_hi - trained, 0.0), max(random - r_lo, 0.0))
    return d - below, d + above


@dataclass(frozen=True)
class Difference:
    """The trained-minus-random difference of one judged statistic (a claim's, or one part's of a combined claim,
    ``name``): both estimates with their intervals, the difference with its interval (:func:`difference_interval`)
    and ``learned``: the difference's interval excludes 0 on the claim's side (an effect claim: :func:`judge` on the
    difference gives "reproduced" or "partly"), or at all (a "within" claim)."""

    name: str | None
    rule: str
    trained: float
    trained_interval: tuple[float, float]
    random: float
    random_interval: tuple[float, float]
    estimate: float
    interval: tuple[float, float]
    learned: bool


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)


def _finite_interval(x) -> bool:
    return x is not None and all(v is not None and math.isfinite(float(v)) for v in x)


def differences(trained: Judged | None, random: Judged | None) -> tuple[Difference, ...]:
    """The differences trained minus random of every statistic the two rows judge on a common scale: both "effect"
    with an estimate, an interval, the same null and the same paper level; both "within" with an estimate, an
    interval and the same range; both "combined": their parts of the same name, each so. Empty where there is none
    (a share, a permutation p without an interval, a row without its rule's fields)."""
    if trained is None or random is None or trained.rule != random.rule:
        return ()
    if trained.rule == "combined":
        theirs = {p.name: p for p in random.parts or ()}
        return tuple(d for p in trained.parts or () if p.name is not None and p.name in theirs
                     for d in differences(p, theirs[p.name]))
    if trained.rule not in ("effect", "within"):
        return ()
    if not (_finite_interval(trained.interval) and _finite_interval(random.interval)
            and _finite_interval((trained.estimate, random.estimate))):
        return ()
    if trained.rule == "effect" and not (_same(trained.null, random.null)
                                         and _same(trained.paper_level, random.paper_level)):
        return ()
    if trained.rule == "within" and not _same(trained.range, random.range):
        return ()
    lo, hi = difference_interval(trained.estimate, trained.interval, random.estimate, random.interval)
    d = trained.estimate - random.estimate
    if trained.rule == "effect":
        # does pre-training add the claimed effect? the claim's own effect size (paper level minus null) as the level
        learned = judge(d, (lo, hi), null=0.0, paper=trained.paper_level - trained.null) in HOLDS_TOO
    else:
        learned = not lo <= 0.0 <= hi
    return (Difference(trained.name, trained.rule, float(trained.estimate), tuple(trained.interval),
                       float(random.estimate), tuple(random.interval), d, (lo, hi), learned),)


@dataclass(frozen=True)
class RandomTest:
    """One random-init control on one claim: its SPEC (``control``) and its pre-trained model's (``trained``;
    ``None`` when that model is not among those compared), the control's own ``verdict`` and the trained model's
    (``trained_verdict``), the :class:`Difference` of each statistic judged on a common scale (none: ``basis`` is
    ``"own verdict"``), and ``too``: the control reproduces the claim too (its own verdict "reproduced" or "partly"
    and, where there are differences, none of them ``learned``)."""

    claim: str
    control: str
    trained: str | None
    verdict: Verdict
    trained_verdict: Verdict | None
    differences: tuple[Difference, ...]
    too: bool

    @property
    def basis(self) -> Basis:
        return "difference" if self.differences else "own verdict"


def random_test(cid: str, control: "ModelResult", trained: "ModelResult | None") -> RandomTest | None:
    """:class:`RandomTest` of claim ``cid`` for ``control`` against its pre-trained model ``trained`` (``None``:
    not among the models); ``None`` when the control has no such claim or it is not applicable to it."""
    mine = by_id(control.claims).get(cid)
    if mine is None or mine.verdict == NOT_APPLICABLE:
        return None
    theirs = by_id(trained.claims).get(cid) if trained is not None else None
    diffs = differences(theirs.judged, mine.judged) if theirs is not None and theirs.verdict != NOT_APPLICABLE else ()
    too = mine.verdict in HOLDS_TOO and not any(d.learned for d in diffs)
    return RandomTest(cid, control.spec, None if trained is None else trained.spec, mine.verdict,
                      None if theirs is None else theirs.verdict, diffs, too)


def counterpart(control: "ModelResult", results: Sequence["ModelResult"]) -> "ModelResult | None":
    """The pre-trained model of a random-init ``control`` among ``results``: SPEC ``X`` for ``random:X``."""
    name, random_init = parse_spec(control.spec)
    if not random_init:
        return None
    return next((r for r in results if r.spec == name and not r.card["random_init"]), None)


# ------------------------------------------------------------------------------------------- findings


@dataclass
class Findings:
    """The claims grouped by the pre-trained models' verdicts (ids, in the paper's order): ``shared`` (reproduced by
    every pre-trained model it applies to), ``model_dependent`` (reproduced by some, not by others), ``none``
    (reproduced by none), ``not_applicable`` (applies to no pre-trained model); per pre-trained model (SPEC), its
    ``partly`` and ``inconclusive`` claims; for the random-init controls: ``random_too`` (reproduced by a control
    too, tested on the difference), ``random_own_verdict`` (a control's own verdict is "reproduced" or "partly" but
    no difference could be formed, so only that verdict says so), ``random_learned`` (a control's own verdict is
    "reproduced" or "partly" but the pre-trained model's statistic exceeds it beyond chance), and every
    :class:`RandomTest` (``tests``)."""

    shared: list[str] = field(default_factory=list)
    model_dependent: list[str] = field(default_factory=list)
    none: list[str] = field(default_factory=list)
    not_applicable: list[str] = field(default_factory=list)
    partly: dict[str, list[str]] = field(default_factory=dict)
    inconclusive: dict[str, list[str]] = field(default_factory=dict)
    random_too: list[str] = field(default_factory=list)
    random_own_verdict: list[str] = field(default_factory=list)
    random_learned: list[str] = field(default_factory=list)
    tests: list[RandomTest] = field(default_factory=list)


def findings(results: Sequence["ModelResult"]) -> Findings:
    """:class:`Findings` of ``results`` (the pre-trained models and the random-init controls, told apart by their
    card's ``random_init``). With several controls, a claim is in ``random_too`` when one control reproduces it too
    on the difference; else in ``random_own_verdict`` when one does on its own verdict; else in
    ``random_learned`` when one shows the pattern but less than its pre-trained model."""
    trained = [r for r in results if not r.card["random_init"]]
    controls = [r for r in results if r.card["random_init"]]
    tables = {r.spec: by_id(r.claims) for r in results}
    ids = list(dict.fromkeys(c.id for r in results for c in r.claims))
    out = Findings(partly={r.spec: [] for r in trained}, inconclusive={r.spec: [] for r in trained})
    for cid in ids:
        got = {r.spec: tables[r.spec][cid].verdict for r in trained if cid in tables[r.spec]}
        applies = {s: v for s, v in got.items() if v != NOT_APPLICABLE}
        if got and not applies:
            out.not_applicable.append(cid)
        elif applies:
            hits = [v == REPRODUCED for v in applies.values()]
            group = out.shared if all(hits) else out.model_dependent if any(hits) else out.none
            group.append(cid)
        for spec, v in applies.items():
            if v == PARTLY:
                out.partly[spec].append(cid)
            elif v == INCONCLUSIVE:
                out.inconclusive[spec].append(cid)
        tests = [t for c in controls if (t := random_test(cid, c, counterpart(c, results))) is not None]
        out.tests += tests
        shows = [t for t in tests if t.verdict in HOLDS_TOO]
        if any(t.too and t.basis == "difference" for t in shows):
            out.random_too.append(cid)
        elif any(t.too for t in shows):
            out.random_own_verdict.append(cid)
        elif shows:
            out.random_learned.append(cid)
    return out


def verdict_counts(results: Sequence["ModelResult"]) -> dict[str, dict[str, int]]:
    """``{spec: {verdict: count}}`` over every verdict (:data:`helpers.claims.VERDICTS`, then "not applicable"),
    zeros included, for each model in ``results``."""
    return {r.spec: {v: sum(c.verdict == v for c in r.claims) for v in (*VERDICTS, NOT_APPLICABLE)} for r in results}

