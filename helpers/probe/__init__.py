"""Paper §5, attention-based probing classifiers: ``stats`` (the classifiers, their training and UAS: the section's
statistics, which the context-mixing section reuses), ``batches`` (padded batches spilled to disk),
``device_batches`` (made on an accelerator from the model's passes), ``run``, ``claims``, ``command`` (``python -m
helpers probe``), ``section`` (``SECTION``, the record). Chapter: ``notebooks/05_probe.ipynb``.
"""
