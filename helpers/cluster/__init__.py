"""Paper §6, clustering heads by Jensen-Shannon distance: ``stats``, ``run``, ``claims``, ``command``
(``python -m helpers cluster``), ``section`` (``SECTION``, the record; it reads §3, §4.2 and §4.3 as inputs).
Chapter: ``notebooks/06_cluster.ipynb``.
"""
