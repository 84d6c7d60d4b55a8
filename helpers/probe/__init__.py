"""Paper §5, attention-based probing classifiers: ``stats`` (the classifiers, their training and UAS: the section's
statistics, which the context-mixing section reuses, and the probes' accumulator on the one route, which packs each
sentence's maps for the batches made from them), ``run``, ``claims``, ``command`` (``python -m helpers probe``),
``section`` (``SECTION``, the record). Chapter: ``notebooks/05_probe.ipynb``.
"""
