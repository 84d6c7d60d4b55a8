"""Claim rows with a chosen verdict for the tests of what shows or counts verdicts (tables, tallies, colours,
comparisons): each verdict made by a rule of :mod:`helpers.claims` from numbers that give it, as every row the
package makes is (a verdict without a rule is refused)."""
from __future__ import annotations

from helpers.claims import INCONCLUSIVE, NOT_REPRODUCED, PARTLY, REPRODUCED, Claim, claim, effect, share

# The rule and numbers that give each verdict: an interval clear of the null reaching (or not) the paper's level; a
# share of replicates in which a statement holds, in between or at neither end.
_JUDGED = {
    REPRODUCED: lambda: effect(12.0, (11.0, 13.0), null=0.0, paper=10.0),
    PARTLY: lambda: effect(8.0, (7.0, 9.0), null=0.0, paper=10.0),
    INCONCLUSIVE: lambda: share(0.5),
    NOT_REPRODUCED: lambda: effect(1.0, (-1.0, 3.0), null=0.0, paper=10.0),
}


def judged_as(verdict: str):
    """A :class:`helpers.claims.Judged` whose verdict is ``verdict``."""
    return _JUDGED[verdict]()


def claim_as(id: str, section: str, verdict: str, value: float | None = 1.0, *, text: str = "c", paper: str = "p",
             ours: str = "o") -> Claim:
    """A claim ``id`` of ``section`` whose verdict is ``verdict`` (a rule's, :func:`judged_as`)."""
    return claim(id, section, text, paper, ours, value, judged_as(verdict), resampled="segments", n=40)


def judged_without_interval(verdict: str):
    """A :class:`helpers.claims.Judged` of ``verdict`` that carries no interval to form a difference from (what the
    comparison judges on the control's own verdict): a share of replicates for reproduced, inconclusive and not
    reproduced; for partly, an effect judged by a permutation p alone."""
    if verdict == PARTLY:
        return effect(5.0, None, null=0.0, paper=10.0, p_value=0.01)
    return share({REPRODUCED: 1.0, INCONCLUSIVE: 0.5, NOT_REPRODUCED: 0.0}[verdict])
