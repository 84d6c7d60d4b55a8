"""Beyond the paper, attention norms ``||alpha f(x)||``: ``stats``, ``run``, ``command`` (``python -m
helpers norms``). Chapter: ``notebooks/07_norms.ipynb``.
"""
