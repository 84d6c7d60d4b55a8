"""Beyond the paper, context-mixing maps: attention rollout, value zeroing (per layer and per head) and ALTI
beside the weights and norms, scored with the paper's probes. ``maps`` (the arithmetic: :func:`token_maps` for
one sentence, :func:`mixing_batch` for a padded batch on the model's device; definitions in
book/methods.md, §Context-mixing maps).
"""
from helpers.mixing.maps import METHODS, check_methods, empty_rows, mixing_batch, mixing_for, token_maps

__all__ = ["METHODS", "check_methods", "empty_rows", "mixing_batch", "mixing_for", "token_maps"]
