"""The probes' former module: everything it held is in :mod:`helpers.probe.stats` (the section's statistics, as
every section has them: the probes, their training and UAS on in-memory arrays, which the context-mixing section
runs on other maps). The same objects under their old names, for the imports written before the move (the
chapters'); new code imports :mod:`helpers.probe.stats`.
"""
from helpers.probe.stats import *  # noqa: F401,F403
