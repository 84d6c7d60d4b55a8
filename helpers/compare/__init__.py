"""Beyond the paper, several models side by side: ``run`` (every section's claims per model, cached),
``findings`` (what holds across them, read off their verdicts; the random-init controls judged on the
trained-minus-random difference) and ``command`` (``python -m helpers compare``). Chapter:
``notebooks/08_compare.ipynb``.
"""
