"""Paper §5, attention-based probing classifiers: ``probes`` (the classifiers and their training),
``batches`` (padded batches spilled to disk), ``device_batches`` (made on an accelerator from the model's
passes), ``run``, ``claims``, ``command`` (``python -m helpers
probe``), ``section`` (``SECTION``, the record). Chapter: ``notebooks/05_probe.ipynb``.
"""
