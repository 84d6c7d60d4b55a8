"""Paper §4.3, coreference: ``stats`` (antecedent selection, baselines), ``run``, ``claims``,
``command`` (``python -m helpers coref``), ``section`` (``SECTION``, the record). Chapter: ``notebooks/04_coref.ipynb``.
"""
