"""Do the syntax heads do syntax? Minimal pairs (BLiMP) scored by the model, with the paper's heads removed (beyond the
paper; chapter ``12_minimal_pairs``, command ``pairs``). :func:`score_pairs` is the scoring contract."""
from helpers.minimal_pairs.scoring import score_pairs

__all__ = ["score_pairs"]
