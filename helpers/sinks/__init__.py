"""Beyond the paper, attention sinks: the share of attention each head gives the first position, and the share of
sink heads (Gu et al. 2025), from attention weights and from norm maps, for any model: ``stats``, ``run``,
``decoder`` (the chapter's decoder), ``claims`` (verdicts, through :mod:`helpers.claims`), ``command`` (``python -m
helpers sinks``), ``section`` (``SECTION``, the record). Chapter: ``notebooks/09_sinks.ipynb``."""
