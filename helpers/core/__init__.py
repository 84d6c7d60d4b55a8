"""Layer 1, the core: a model in, attention maps out. Loading any BERT-family model (and the optional
offline extras), encoding words and segments, token- and word-level maps ``[layer, head, query, key]``,
attention internals (queries, keys, values through hooks), norm maps, and 1-based head labels.
Imports only :mod:`helpers.config`.
"""
