"""Layer 3, steps the sections share: extraction of a corpus into the cache, the distributed engine,
the segments of §3 and §6, and what every command shares (options, loading the model, validators).
"""
