"""Layer 2, data: every read and write. CoNLL-U, the corpora (GUM, UD English EWT) and their pinned
manifest, the paper's segments, OntoGUM coreference, the on-disk cache of maps and results, and the
one atomic writer (:mod:`helpers.data.files`).
"""
