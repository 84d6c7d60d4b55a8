"""Paper §4.2, heads as dependency parsers: ``stats`` (scoring every head), ``run``, ``claims``,
``command`` (``python -m helpers heads``), ``section`` (``SECTION``, the record). Chapter: ``notebooks/04_syntax.ipynb``.
"""
