"""A claim of the paper and our verdict on it, as data: one owner per verdict, one convention for every claim.

Each section's module has a ``claims(...)`` that returns :class:`Claim` rows with stable kebab-case ids. Every
verdict comes from one of four rules, on a statistic and its 95 % interval (``lo, hi``), and each row carries the
numbers its rule read, so that the verdict follows from the row itself (:func:`expected_verdict`; a row whose
verdict does not is refused when it is made):

- :func:`judge` (rule ``"effect"``): an effect claim, whose direction is the side of ``paper`` (the paper's level,
  or ours where the paper states none) from ``null`` (no effect). With ``paper > null``: the interval above the
  null (``lo > null``) gives *reproduced* when the estimate reaches the paper's level, else *partly*; an interval
  that holds the null gives *inconclusive* when it also reaches the paper's level (``hi >= paper``), else *not
  reproduced*. With ``paper < null``, the mirror. A permutation test may stand in for the interval's test of the
  null: ``p < 0.05`` counts as "the interval excludes the null".
- :func:`judge_within` (rule ``"within"``): a quantity lies in ``[low, high]`` ("close to", "little cost", "a
  no-op"): *reproduced* when the interval lies inside, *not reproduced* when it lies wholly outside, otherwise
  *inconclusive*.
- :func:`judge_share` (rule ``"share"``): a discrete statement (an argmax layer, "some head above 0.5"), by the
  share of bootstrap replicates in which it holds: at least 0.95 *reproduced*, at most 0.05 *not reproduced*,
  otherwise *inconclusive*.
- :func:`combine` (rule ``"combined"``): a claim of several parts: *not reproduced* if any part is; else
  *reproduced* if all are; else *inconclusive* if any part is; else *partly*.

A claim that cannot be judged on this model (a decoder has no [SEP]; its premise does not hold; a statistic is
undefined, NaN, at these sizes) is *not applicable*, with its reason: never a verdict on the paper's claim.

>>> judge(12.0, (4.0, 20.0), null=0.0, paper=15.0)    # above the null, short of the paper's level
'partly'
>>> judge(3.0, (-1.0, 7.0), null=0.0, paper=15.0)     # holds the null and cannot reach the paper's level
'not reproduced'
>>> judge_within(0.004, (-0.002, 0.009), low=-0.01, high=0.01)
'reproduced'
>>> combine("reproduced", "inconclusive", "partly")
'inconclusive'
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Literal, Mapping, Sequence

Verdict = Literal["reproduced", "partly", "inconclusive", "not reproduced", "not applicable"]
REPRODUCED: Verdict = "reproduced"
PARTLY: Verdict = "partly"
INCONCLUSIVE: Verdict = "inconclusive"  # the data do not decide: the interval holds both the null and the paper's level
NOT_REPRODUCED: Verdict = "not reproduced"
VERDICTS: tuple[Verdict, ...] = (REPRODUCED, PARTLY, INCONCLUSIVE, NOT_REPRODUCED)  # best first, "not reproduced" last
# A claim that cannot apply to the model (a decoder has no [SEP]; no token is "next" under a causal mask; its
# premise fails; its statistic is undefined): no verdict on the paper's claim, neither for nor against it. Never
# counted among :data:`VERDICTS`.
NOT_APPLICABLE: Verdict = "not applicable"

Rule = Literal["effect", "within", "share", "combined"]
RULES: tuple[Rule, ...] = ("effect", "within", "share", "combined")
LEVEL = 0.95         # every interval is a 95 % interval
P_LEVEL = 0.05       # a permutation p below this excludes the null (a test standing in for the interval)
SHARE_HOLDS = 0.95   # judge_share: the statement holds in at least this share of the bootstrap replicates ...
SHARE_FAILS = 0.05   # ... or fails in all but at most this share
# A rule judges its numbers as a row reports them, to this many significant digits: a statistic whose last bits
# depend on the order of a float sum (another device, another batch) gives the same row and the same verdict.
DIGITS = 10

FIELDS = ("id", "section", "claim", "paper", "ours", "value", "verdict")  # the first fields of one claim's JSON
# The fields of the rule that judged it (every row has each; null where its rule has none, all null when the claim
# is not applicable): the rule, the judged statistic and its interval, the null and the paper's level (effect), the
# range (within), the share of replicates (share), the parts' verdicts and rows (combined), the permutation p that
# stands in for an interval (effect), the resampled unit and how many.
RULE_FIELDS = ("rule", "estimate", "interval", "null", "paper_level", "range", "share", "parts", "part_rows",
               "p_value", "resampled", "n")


# ------------------------------------------------------------------------------------------- the four rules


def _finite(*xs) -> bool:
    return all(x is not None and math.isfinite(float(x)) for x in xs)


def _interval(interval) -> tuple[float, float]:
    lo, hi = (float(x) for x in interval)
    if not _finite(lo, hi):
        raise ValueError(f"interval {interval!r} has an undefined end: such a claim is not applicable")
    if lo > hi:
        raise ValueError(f"interval {interval!r}: its low end is above its high end")
    return lo, hi


def judge(estimate: float, interval: Sequence[float] | None, *, null: float, paper: float,
          p_value: float | None = None) -> Verdict:
    """An effect claim (rule ``"effect"``): ``estimate`` with its 95 % ``interval`` against ``null`` (no effect) and
    ``paper`` (the level claimed), the claim's direction being the side of ``paper`` from ``null``.

    With ``paper > null``: ``lo > null`` gives ``"reproduced"`` when ``estimate >= paper``, else ``"partly"``;
    ``lo <= null`` gives ``"inconclusive"`` when ``hi >= paper``, else ``"not reproduced"``. With ``paper < null``
    the mirror (``hi < null``; ``estimate <= paper``; ``lo <= paper``). A permutation ``p_value`` stands in for the
    interval's test of the null (``p < 0.05`` excludes it); without an interval, a test that does not exclude the
    null cannot tell the paper's level from the null either: ``"inconclusive"``.

    >>> judge(20.0, (16.0, 24.0), null=0.0, paper=15.0), judge(-0.3, (-0.5, -0.1), null=0.0, paper=-0.5)
    ('reproduced', 'partly')
    """
    if not _finite(estimate, null, paper) or (p_value is not None and not _finite(p_value)):
        raise ValueError("judge: an undefined (NaN) number: such a claim is not applicable")
    if paper == null:
        raise ValueError(f"judge: the paper's level {paper!r} equals the null: the claim has no direction")
    if interval is None and p_value is None:
        raise ValueError("judge: an effect claim needs its interval (or a permutation p standing in for it)")
    up = paper > null
    if interval is not None:
        lo, hi = _interval(interval)
        excludes = lo > null if up else hi < null
        reaches = hi >= paper if up else lo <= paper
    else:
        excludes, reaches = False, True
    if p_value is not None:
        excludes = p_value < P_LEVEL
    if excludes:
        return REPRODUCED if (estimate >= paper if up else estimate <= paper) else PARTLY
    return INCONCLUSIVE if reaches else NOT_REPRODUCED


def judge_within(estimate: float, interval: Sequence[float], *, low: float, high: float) -> Verdict:
    """A claim that a quantity lies in ``[low, high]`` (rule ``"within"``): ``"reproduced"`` when the 95 %
    ``interval`` lies inside the range, ``"not reproduced"`` when it lies wholly outside, else ``"inconclusive"``.

    >>> judge_within(0.03, (0.02, 0.05), low=-0.01, high=0.01)
    'not reproduced'
    """
    if not _finite(estimate, low, high):
        raise ValueError("judge_within: an undefined (NaN) number: such a claim is not applicable")
    if low > high:
        raise ValueError(f"judge_within: the range [{low}, {high}] is empty")
    lo, hi = _interval(interval)
    if low <= lo and hi <= high:
        return REPRODUCED
    if hi < low or lo > high:
        return NOT_REPRODUCED
    return INCONCLUSIVE


def judge_share(share: float) -> Verdict:
    """A discrete statement (rule ``"share"``), by the ``share`` of bootstrap replicates in which it holds: at least
    :data:`SHARE_HOLDS` ``"reproduced"``, at most :data:`SHARE_FAILS` ``"not reproduced"``, else ``"inconclusive"``.

    >>> judge_share(0.97), judge_share(0.5), judge_share(0.0)
    ('reproduced', 'inconclusive', 'not reproduced')
    """
    if not _finite(share) or not 0.0 <= share <= 1.0:
        raise ValueError(f"judge_share: share {share!r} is not a share of replicates in [0, 1]")
    return REPRODUCED if share >= SHARE_HOLDS else NOT_REPRODUCED if share <= SHARE_FAILS else INCONCLUSIVE


def combine(*verdicts: Verdict) -> Verdict:
    """A claim of several parts (rule ``"combined"``): ``"not reproduced"`` if any part is; else ``"reproduced"``
    if all are; else ``"inconclusive"`` if any part is; else ``"partly"``. A part that is not applicable leaves
    the whole without a verdict: it is refused here (the caller makes the row not applicable, saying which part).

    >>> combine("reproduced", "partly"), combine("reproduced", "not reproduced", "inconclusive")
    ('partly', 'not reproduced')
    """
    if not verdicts:
        raise ValueError("combine: no parts")
    bad = [v for v in verdicts if v not in VERDICTS]
    if bad:
        raise ValueError(f"combine: part verdicts {bad} are not among {VERDICTS} (a part not applicable leaves the "
                         "claim not applicable)")
    if NOT_REPRODUCED in verdicts:
        return NOT_REPRODUCED
    if all(v == REPRODUCED for v in verdicts):
        return REPRODUCED
    return INCONCLUSIVE if INCONCLUSIVE in verdicts else PARTLY


# ------------------------------------------------------------------------------------ the parts of a claim


@dataclass(frozen=True)
class Judged:
    """What a rule read and what it gave: the fields of :data:`RULE_FIELDS` but the unit (``resampled``, ``n``),
    which the claim row says. Made by :func:`effect`, :func:`within`, :func:`share` and :func:`combined`; a part of
    a combined claim is one too, with its ``name``."""

    rule: Rule
    verdict: Verdict
    estimate: float | None = None
    interval: tuple[float, float] | None = None
    null: float | None = None
    paper_level: float | None = None
    range: tuple[float, float] | None = None
    share: float | None = None
    parts: tuple["Judged", ...] | None = None
    p_value: float | None = None
    name: str | None = None

    def fields(self) -> dict:
        """The rule's fields of a claim's JSON (:data:`RULE_FIELDS` without ``resampled`` and ``n``)."""
        return {"rule": self.rule, "estimate": _num(self.estimate), "interval": _pair(self.interval),
                "null": _num(self.null), "paper_level": _num(self.paper_level), "range": _pair(self.range),
                "share": _num(self.share),
                "parts": None if self.parts is None else [p.verdict for p in self.parts],
                "part_rows": None if self.parts is None else [{"name": p.name, "verdict": p.verdict, **p.fields()}
                                                              for p in self.parts],
                "p_value": _num(self.p_value)}


def _num(x) -> float | None:
    return None if x is None else float(x)


def reported(x):
    """``x`` (a number, or a pair of numbers) to :data:`DIGITS` significant digits, as a row reports it and a rule
    judges it (``None`` stays ``None``; NaN and infinities stay as they are).

    >>> reported(0.1 + 0.2), reported((1 / 3, 2 / 3))
    (0.3, (0.3333333333, 0.6666666667))
    """
    if x is None:
        return None
    if isinstance(x, (tuple, list)) or hasattr(x, "__len__"):
        return tuple(reported(v) for v in x)
    x = float(x)
    return float(f"{x:.{DIGITS}g}") if math.isfinite(x) else x


def _pair(x) -> list[float] | None:
    return None if x is None else [float(x[0]), float(x[1])]


class Undefined(ValueError):
    """A rule was handed an undefined number (NaN, or no interval): the claim is not applicable, with ``reason``."""


def effect(estimate: float, interval: Sequence[float] | None, *, null: float, paper: float,
           p_value: float | None = None, name: str | None = None) -> Judged:
    """:func:`judge` with the numbers it read (rule ``"effect"``); raises :class:`Undefined` on a NaN, or without
    an interval (and no permutation p standing in for it)."""
    if interval is None and p_value is None:
        raise Undefined(f"{name or 'the estimate'} has no interval at these sizes")
    if not _finite(estimate) or (interval is not None and not _finite(*interval)) \
            or (p_value is not None and not _finite(p_value)):
        raise Undefined(f"{name or 'the estimate'} or its interval is undefined (NaN) at these sizes")
    estimate, interval, p_value = reported(estimate), reported(interval), reported(p_value)
    null, paper = reported(null), reported(paper)
    v = judge(estimate, interval, null=null, paper=paper, p_value=p_value)
    return Judged("effect", v, estimate=estimate, interval=interval, null=null, paper_level=paper, p_value=p_value,
                  name=name)


def within(estimate: float, interval: Sequence[float], *, low: float, high: float, name: str | None = None) -> Judged:
    """:func:`judge_within` with the numbers it read (rule ``"within"``); raises :class:`Undefined` on a NaN."""
    if interval is None or not _finite(estimate, *interval):
        raise Undefined(f"{name or 'the estimate'} or its interval is undefined (NaN) at these sizes")
    estimate, interval, low, high = reported(estimate), reported(interval), reported(low), reported(high)
    return Judged("within", judge_within(estimate, interval, low=low, high=high), estimate=estimate,
                  interval=interval, range=(low, high), name=name)


def share(fraction: float, *, estimate: float | None = None, name: str | None = None) -> Judged:
    """:func:`judge_share` of the share of bootstrap replicates in which a statement holds (rule ``"share"``);
    ``estimate`` is the statistic of the full sample the statement is about (optional)."""
    if not _finite(fraction):
        raise Undefined(f"{name or 'the statement'} is undefined at these sizes")
    fraction, estimate = reported(fraction), reported(estimate)
    return Judged("share", judge_share(fraction), share=fraction, estimate=estimate, name=name)


def combined(*parts: Judged) -> Judged:
    """:func:`combine` of ``parts`` (each a named :class:`Judged`), with them (rule ``"combined"``)."""
    return Judged("combined", combine(*(p.verdict for p in parts)), parts=tuple(parts))


def expected_verdict(row: Mapping) -> Verdict:
    """The verdict a claim's JSON row (or :class:`Judged` fields) must carry, from its own fields by the rules of
    this module: ``"not applicable"`` without a rule. Every row the package writes passes this check."""
    rule = row.get("rule")
    if rule is None:
        return NOT_APPLICABLE
    if rule == "effect":
        return judge(row["estimate"], row["interval"], null=row["null"], paper=row["paper_level"],
                     p_value=row.get("p_value"))
    if rule == "within":
        low, high = row["range"]
        return judge_within(row["estimate"], row["interval"], low=low, high=high)
    if rule == "share":
        return judge_share(row["share"])
    if rule == "combined":
        parts = row.get("part_rows")
        if parts is not None:
            for p in parts:
                if expected_verdict(p) != p["verdict"]:
                    raise ValueError(f"part {p.get('name')!r}: verdict {p['verdict']!r} does not follow from its fields")
            if [p["verdict"] for p in parts] != list(row["parts"]):
                raise ValueError("parts and part_rows disagree")
        return combine(*row["parts"])
    raise ValueError(f"unknown rule {rule!r} (one of {RULES})")


# ------------------------------------------------------------------------------------------------ a claim


@dataclass(frozen=True)
class Claim:
    """One claim: ``id`` (stable, kebab-case), ``section`` of the paper ("§3.1"), the ``claim`` in words, the
    ``paper``'s number and ``ours`` as text, ``value`` (our headline number, in its units; ``None`` when there is
    none), the ``verdict``, and ``judged``: what its rule read (:class:`Judged`), with the resampled unit
    (``resampled``: "segments", "sentences", "documents", "pairs" ...) and how many (``n``). A claim that is not
    applicable has no ``judged`` and says why (``reason``). Make one with :func:`claim` or :func:`not_applicable`."""

    id: str
    section: str
    claim: str
    paper: str
    ours: str
    value: float | None
    verdict: Verdict
    reason: str | None = None
    judged: Judged | None = field(default=None, compare=False)
    resampled: str | None = None
    n: int | None = None

    def __post_init__(self):
        if self.verdict not in (*VERDICTS, NOT_APPLICABLE):
            raise ValueError(f"claim {self.id}: verdict {self.verdict!r} is not one of {(*VERDICTS, NOT_APPLICABLE)}")
        if (self.verdict == NOT_APPLICABLE) != bool(self.reason):
            raise ValueError(f"claim {self.id}: a {NOT_APPLICABLE!r} claim, and only such a claim, says why (reason)")
        if self.value is not None and not math.isfinite(self.value):
            object.__setattr__(self, "value", None)
        if self.verdict == NOT_APPLICABLE and self.judged is not None:
            raise ValueError(f"claim {self.id}: a claim not applicable is judged by no rule")
        if self.verdict != NOT_APPLICABLE and self.judged is None:
            raise ValueError(f"claim {self.id}: a verdict comes from a rule (judged=effect(...), within(...), share(...) "
                             "or combined(...)); make the row with helpers.claims.claim")
        if self.judged is not None:
            if self.judged.verdict != self.verdict:
                raise ValueError(f"claim {self.id}: verdict {self.verdict!r}, but its rule gave {self.judged.verdict!r}")
            expected = expected_verdict(self.judged.fields())
            if expected != self.verdict:
                raise ValueError(f"claim {self.id}: verdict {self.verdict!r} does not follow from its fields "
                                 f"({expected!r})")

    def to_json(self) -> dict:
        """``{"id", "section", "claim", "paper", "ours", "value", "verdict"}``, ``"reason"`` for a
        :data:`NOT_APPLICABLE` claim, then the rule's fields (:data:`RULE_FIELDS`, each ``None`` where the rule has
        none and all ``None`` for a claim not applicable)."""
        out = {"id": self.id, "section": self.section, "claim": self.claim, "paper": self.paper, "ours": self.ours,
               "value": self.value, "verdict": self.verdict}
        if self.reason:
            out["reason"] = self.reason
        rule = self.judged.fields() if self.judged is not None else dict.fromkeys(RULE_FIELDS[:-2])
        return {**out, **rule, "resampled": self.resampled, "n": self.n}


def claim(id: str, section: str, text: str, paper: str, ours: str, value: float | None, judged: Judged | Undefined, *,
          resampled: str | None, n: int | None) -> Claim:
    """A judged claim: its verdict is ``judged``'s (:func:`effect`, :func:`within`, :func:`share`,
    :func:`combined`); an :class:`Undefined` (a rule handed a NaN) makes it not applicable, with its reason."""
    if isinstance(judged, Undefined):
        return not_applicable(id, section, text, paper, str(judged))
    return Claim(id, section, text, paper, ours, value, judged.verdict, judged=judged, resampled=resampled, n=n)


def judged_or_undefined(make, *args, **kwargs) -> Judged | Undefined:
    """``make(*args, **kwargs)`` (a rule of this module), or the :class:`Undefined` it raised: for :func:`claim`."""
    try:
        return make(*args, **kwargs)
    except Undefined as exc:
        return exc


def not_applicable(id: str, section: str, claim: str, paper: str, reason: str) -> Claim:
    """A claim that cannot apply to the model, with the ``reason`` (``ours`` says it; ``value`` is ``None``).

    >>> not_applicable("x", "§3.2", "[SEP] ...", ">90%", "a decoder has no [SEP]").verdict
    'not applicable'
    """
    return Claim(id, section, claim, paper, f"not applicable: {reason}", None, NOT_APPLICABLE, reason)


def check_row(row: Mapping) -> None:
    """Raise unless the claim's JSON ``row`` carries every field and its verdict follows from them."""
    missing = [k for k in (*FIELDS, *RULE_FIELDS) if k not in row]
    if missing:
        raise ValueError(f"claim {row.get('id')}: fields {missing} missing")
    expected = expected_verdict(row)
    if expected != row["verdict"]:
        raise ValueError(f"claim {row['id']}: verdict {row['verdict']!r} does not follow from its fields ({expected!r})")
    if row["verdict"] == NOT_APPLICABLE and any(row[k] is not None for k in RULE_FIELDS):
        raise ValueError(f"claim {row['id']}: a claim not applicable carries its rule's fields as null")


# ------------------------------------------------------------------------------------------------ helpers


def by_id(claims: Iterable[Claim]) -> dict[str, Claim]:
    """``{id: claim}``; raises on a repeated id."""
    out: dict[str, Claim] = {}
    for c in claims:
        if c.id in out:
            raise ValueError(f"claim id {c.id!r} appears twice")
        out[c.id] = c
    return out


def interval_text(value: float, interval: Sequence[float] | None, fmt: str = ".1f") -> str:
    """``"78.5 [71.9, 84.7]"`` (value with its 95% interval; the interval left out when unknown)."""
    if interval is None or not all(math.isfinite(x) for x in interval):
        return format(value, fmt)
    return f"{value:{fmt}} [{interval[0]:{fmt}}, {interval[1]:{fmt}}]"
