"""Paper §5 as one record (:class:`helpers.section.Section`): chapter ``05_probe``, command ``probe``.

>>> result = SECTION.run(lm, ctx)                 # doctest: +SKIP
>>> result["rows"]["Attn"]["test"]["mean"]        # doctest: +SKIP
"""
from __future__ import annotations

from helpers.claims import Claim
from helpers.context import RunContext
from helpers.core.models import LoadedModel
from helpers.probe import claims as probe_claims
from helpers.probe.command import COMMAND
from helpers.probe.run import EPOCHS, SEEDS, SMALL_EPOCHS, SMALL_SENTENCES, probe_corpora, run_probes
from helpers.section import Section, Sizes


def _run(lm: LoadedModel, ctx: RunContext, settings: dict, inputs: dict) -> dict:
    """Table 3 (:func:`~helpers.probe.run.run_probes`, cached): every probe with each seed."""
    s = settings
    return run_probes(lm, seeds=tuple(s["seeds"]), epochs=s["epochs"], max_sentences=s["max_sentences"],
                      max_length=s["max_length"], data_dir=ctx.data_dir, cache_root=ctx.cache_dir, progress=ctx.progress)


def _claims(result: dict) -> list[Claim]:
    return probe_claims.claims(result)


SECTION = Section(
    key="probe", paper=probe_claims.PAPER_SECTION, chapter="05_probe",
    sizes=Sizes(full={"max_sentences": None, "epochs": EPOCHS, "seeds": SEEDS},
                small={"max_sentences": SMALL_SENTENCES, "epochs": SMALL_EPOCHS, "seeds": SEEDS}),
    runner=_run, claims=_claims, command=COMMAND, corpora=tuple(probe_corpora().values()),
)
