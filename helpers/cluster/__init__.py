"""Paper §6, clustering heads by Jensen-Shannon distance: ``stats``, ``run``, ``claims``, ``command``
(``python -m helpers cluster``). Chapter: ``notebooks/06_cluster.ipynb``.
"""
