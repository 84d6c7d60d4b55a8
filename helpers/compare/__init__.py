"""Beyond the paper, several models side by side: ``run`` (every section's claims per model, cached)
and ``command`` (``python -m helpers compare``). Chapter: ``notebooks/08_compare.ipynb``.
"""
