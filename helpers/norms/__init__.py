"""Beyond the paper, attention norms ``||alpha f(x)||``: ``stats``, ``run``, ``claims`` (verdicts, through
:mod:`helpers.claims`), ``command`` (``python -m helpers norms``), ``section`` (``SECTION``, the record). Chapter: ``notebooks/07_norms.ipynb``.
"""
