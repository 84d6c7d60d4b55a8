"""Paper §3, surface-level patterns: ``stats`` (streaming per-head statistics), ``gradients`` and
``mlm`` (the gradient analysis), ``run`` (the chapter's run, cached), ``claims`` (verdicts),
``command`` (``python -m helpers surface``) and ``section`` (``SECTION``, the record of them all).
Chapter: ``notebooks/03_surface.ipynb``.
"""
