"""Attention sinks: the share of attention each head gives the first position, and the share of sink heads
(Gu et al. 2025), from attention weights and from norm maps, for any model (``python -m helpers sinks``)."""
