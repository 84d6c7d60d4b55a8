"""A claim of the paper and our verdict on it, as data: one owner per verdict.

Each paper section's module has a ``claims(...)`` that returns :class:`Claim` rows with stable
kebab-case ids, each verdict from one rule function whose thresholds are named constants of that
module. Chapters and the summary only show (glue) these rows; they never decide a verdict.

>>> from helpers.claims import Claim, verdict, at_most_partly_if_overlaps
>>> verdict(full=False, partial=True)
'partly'
>>> at_most_partly_if_overlaps("reproduced", (71.9, 84.7), 74.9)   # the interval holds the compared number
'partly'
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Iterable, Literal, Sequence

Verdict = Literal["reproduced", "partly", "not reproduced", "not applicable"]
REPRODUCED: Verdict = "reproduced"
PARTLY: Verdict = "partly"
NOT_REPRODUCED: Verdict = "not reproduced"
VERDICTS: tuple[Verdict, ...] = (REPRODUCED, PARTLY, NOT_REPRODUCED)  # best first
# A claim that cannot apply to the model (a decoder has no [SEP]; no token is "next" under a causal mask): no
# verdict on the paper's claim, neither for nor against it. Never counted among :data:`VERDICTS`.
NOT_APPLICABLE: Verdict = "not applicable"
FIELDS = ("id", "section", "claim", "paper", "ours", "value", "verdict")  # the JSON layout of one claim


@dataclass(frozen=True)
class Claim:
    """One claim: ``id`` (stable, kebab-case), ``section`` of the paper ("§3.1"), the ``claim`` in words,
    the ``paper``'s number and ``ours`` as text, ``value`` (our headline number: the first number of
    ``ours``, in its units; ``None`` when there is none) and the ``verdict``."""

    id: str
    section: str
    claim: str
    paper: str
    ours: str
    value: float | None
    verdict: Verdict
    reason: str | None = None

    def __post_init__(self):
        if self.verdict not in (*VERDICTS, NOT_APPLICABLE):
            raise ValueError(f"claim {self.id}: verdict {self.verdict!r} is not one of {(*VERDICTS, NOT_APPLICABLE)}")
        if (self.verdict == NOT_APPLICABLE) != bool(self.reason):
            raise ValueError(f"claim {self.id}: a {NOT_APPLICABLE!r} claim, and only such a claim, says why (reason)")
        if self.value is not None and not math.isfinite(self.value):
            object.__setattr__(self, "value", None)

    def to_json(self) -> dict:
        """``{"id", "section", "claim", "paper", "ours", "value", "verdict"}``, and ``"reason"`` for a
        :data:`NOT_APPLICABLE` claim (the layout of every other claim is unchanged)."""
        out = {k: asdict(self)[k] for k in FIELDS}
        return {**out, "reason": self.reason} if self.reason else out


def not_applicable(id: str, section: str, claim: str, paper: str, reason: str) -> Claim:
    """A claim that cannot apply to the model, with the ``reason`` (``ours`` says it; ``value`` is ``None``).

    >>> not_applicable("x", "§3.2", "[SEP] ...", ">90%", "a decoder has no [SEP]").verdict
    'not applicable'
    """
    return Claim(id, section, claim, paper, f"not applicable: {reason}", None, NOT_APPLICABLE, reason)


def verdict(full: bool, partial: bool = False) -> Verdict:
    """``"reproduced"`` when ``full``, else ``"partly"`` when ``partial``, else ``"not reproduced"``."""
    return REPRODUCED if full else (PARTLY if partial else NOT_REPRODUCED)


def overlaps(interval: Sequence[float] | None, *numbers: float) -> bool:
    """True when the closed ``interval`` ``(lo, hi)`` holds any of ``numbers`` (an unknown interval, with a
    NaN end or ``None``, holds every number: nothing is established)."""
    if interval is None:
        return True
    lo, hi = interval
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return True
    return any(lo <= n <= hi for n in numbers)


def at_most_partly_if_overlaps(v: Verdict, interval: Sequence[float] | None, *compared: float) -> Verdict:
    """Cap ``v`` at ``"partly"`` where our 95% ``interval`` overlaps a number we compare against: the
    data do not separate the two, so the claim cannot count as reproduced."""
    return PARTLY if v == REPRODUCED and overlaps(interval, *compared) else v


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
