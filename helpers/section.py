"""One record per paper section: :class:`Section` says everything the package knows about a section once.

Each section package defines ``SECTION = Section(...)`` in its ``section.py``: its key, the paper's
section, its chapter notebook, the sizes of its runs (:class:`Sizes`: the book's and the small test
configuration's), ``run(lm, ctx) -> report`` covering all of the chapter's runs, ``claims(report)`` and
its command. :data:`helpers.results.SECTIONS` lists the records in the paper's order; the claims
table, the comparison, "Results at a glance", the CLI's table, the build plan and the tests iterate over
it.

A section that needs another's results (§6 colours heads by the behaviours of §3 and the heads of §4.2
and §4.3) declares it in ``inputs``; its run is handed those sections' reports (computed lazily, so a
report costs only the parts that are read), never imports their runs.

>>> from helpers.surface.section import SECTION              # doctest: +SKIP
>>> report = SECTION.run(lm, RunContext.from_env())           # doctest: +SKIP
>>> [c.id for c in SECTION.claims(report)][:2]                # doctest: +SKIP
['prev-token-heads', 'next-token-heads']
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Mapping

from helpers.claims import Claim
from helpers.context import RunContext
from helpers.core.encoding import MAX_LENGTH  # a setting of every section's run

# What a causal mask means, the same for every section; each section's :attr:`Section.causal` says what its
# analyses are under it. Both go into a decoder's JSON (:meth:`Section.causal_json`).
CAUSAL_MASK = ("a decoder's head sees its prefix: query i attends to positions 0..i only; its input is BOS + text, "
               "no [SEP], so that the first position is not a word, as [CLS] is not (without BOS, --no-bos, the text "
               "alone, its first word in the first position)")


@dataclass(frozen=True)
class Sizes:
    """The settings of a section's runs in the book (``full``) and in the small configuration of the notebook
    tests (``small``): its sizes (``None``: all of a corpus), which differ, and the other settings a caller
    may override (a seed, the permutations of a test), which do not. Both name the same settings."""

    full: Mapping[str, Any]
    small: Mapping[str, Any]

    def __post_init__(self):
        if set(self.full) != set(self.small):
            raise ValueError(f"Sizes: full {sorted(self.full)} and small {sorted(self.small)} name different settings")

    def pick(self, small: bool) -> dict[str, Any]:
        """The settings of one configuration, with :data:`MAX_LENGTH`."""
        return {"max_length": MAX_LENGTH, **(self.small if small else self.full)}


class part(cached_property):
    """A part of a section's report (an object with a ``ctx``): computed when first read, then kept, and
    computed inside ``ctx.active()`` (so ``refresh`` holds for it, whenever it is read)."""

    def __get__(self, instance, owner=None):
        if instance is None or self.attrname in instance.__dict__:
            return super().__get__(instance, owner)
        with instance.ctx.active():
            return super().__get__(instance, owner)


class input_report:
    """A report attribute that is one of its input reports, by the attribute's name (``surface = input_report()``:
    ``report.surface`` is ``report.inputs["surface"]``)."""

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, instance, owner=None):
        return self if instance is None else instance.inputs[self.name]


class SectionReport:
    """The report of a section's run: the model, the context, the run's ``settings`` and the ``inputs`` (the
    reports of the sections it reads), with its results as :class:`part` attributes, computed when first
    read. A subclass is itself a section's runner (``Section(runner=MyReport, ...)``: the record calls
    ``MyReport(lm, ctx, settings, inputs)``). Every report has the same shape: its parts, ``to_json(...)`` (the
    JSON of the section's command, whose options it takes) and the record's ``claims(report)``."""

    def __init__(self, lm, ctx: RunContext, settings: dict, inputs: Mapping[str, Any]):
        self.lm, self.ctx, self.settings, self.inputs = lm, ctx, settings, inputs

    def computed(self, name: str) -> bool:
        """Whether the part ``name`` has been computed (read) already."""
        return name in vars(self)

    def to_json(self, **options) -> dict:
        """The JSON of the section's command (its layout is the command's contract)."""
        raise NotImplementedError(f"{type(self).__name__}.to_json")


# ``runner(lm, ctx, settings, inputs) -> report``: ``settings`` as :meth:`Section.settings` returns them,
# ``inputs`` the reports of the sections named in :attr:`Section.inputs`.
Runner = Callable[[Any, RunContext, dict, dict], Any]


@dataclass(frozen=True)
class Section:
    """A paper section: ``key`` (its package, e.g. ``"surface"``), ``paper`` (its section in the paper,
    ``"§3"``; ``None`` beyond the paper), ``chapter`` (its notebook, ``"03_surface"``), ``sizes``,
    ``runner`` (see :meth:`run`), ``claims(report) -> list[Claim]``, its ``command`` (a
    :class:`helpers.pipeline.options.Command`), ``inputs`` (the keys of the sections whose reports its
    run reads), ``corpora`` (what its own runs read, :func:`helpers.data.corpora.corpus_read` names:
    ``"gum:test"``, ``"segments:gum:train"``, ``"ontogum:dev"``; its inputs' reads are theirs) and ``causal``
    (what its analyses are under a causal mask, a decoder's: said once here, shown in its JSON by
    :meth:`causal_json`). The corpus
    checks of ``claims`` and ``compare``, the build plan (:mod:`helpers.plan`) and the order of the book's
    pages (``scripts/execute_book.py``) are derived from ``inputs`` and ``corpora``."""

    key: str
    paper: str | None
    chapter: str
    sizes: Sizes
    runner: Runner = field(repr=False)
    claims: Callable[[Any], list[Claim]] = field(repr=False)
    command: Any = field(repr=False)
    inputs: tuple[str, ...] = ()
    corpora: tuple[str, ...] = ()
    causal: str = ""  # how the section's analyses are defined under a causal mask (a decoder's), said once here
    # Reads made only when an option is on: ``{read: option}``, a read being a corpus of ``corpora`` or
    # ``"INPUT:CORPUS"`` (a corpus an input section reads for this one, cluster's ``"syntax:gum:dev"``), the option a
    # setting or a command's option (its ``args`` attribute) whose truth says whether the run reads it.
    when: Mapping[str, str] = field(default_factory=dict)

    def command_reads(self, options: Mapping[str, Any]) -> tuple[str, ...]:
        """What the section's command reads with ``options`` (its parsed options, ``vars(args)``), each once: its own
        reads, being the corpora its options name where its command says so (``Command.reads``: ``heads --conllu``
        replaces GUM test, GUM dev and EWT dev), else its :attr:`corpora` (those of :attr:`when` only when their
        option is on), then the input sections' reads of :attr:`when` whose option is on. The command's corpus check
        reads exactly these before the model loads (``claims`` and ``compare`` check every record's :attr:`corpora`)."""
        named = getattr(self.command, "reads", None)
        own = named(options) if named is not None else tuple(
            r for r in self.corpora if r not in self.when or options.get(self.when[r]))
        out = list(own)
        for read, option in self.when.items():
            if read in self.corpora or not options.get(option):
                continue
            head, _, corpus = read.partition(":")
            out.append(corpus if head in self.inputs else read)
        return tuple(dict.fromkeys(out))

    def causal_json(self, lm) -> dict | None:
        """What the section's JSON says of a decoder (``lm.causal``): ``{"mask", "bos", "definition"}``, the
        mask (:data:`CAUSAL_MASK`) and this section's :attr:`causal`; ``None`` for an encoder (whose JSON is
        unchanged)."""
        if not getattr(lm, "causal", False):
            return None
        return {"mask": CAUSAL_MASK, "bos": bool(lm.bos), "definition": self.causal}

    @property
    def in_paper(self) -> bool:
        """Whether the section is one of the paper's (its claims are the paper's claims)."""
        return self.paper is not None

    def covers(self, paper_section: str) -> bool:
        """Whether ``paper_section`` (a claim's ``section``, e.g. ``"§3.2"``) is this section or one of its
        subsections."""
        return self.paper is not None and (paper_section == self.paper or paper_section.startswith(self.paper + "."))

    def settings(self, ctx: RunContext, **overrides) -> dict[str, Any]:
        """The settings of the run in ``ctx``'s configuration, with ``overrides`` (``None``: keep the
        configuration's); raises on a setting this section does not have."""
        out = self.sizes.pick(ctx.small)
        unknown = sorted(set(overrides) - set(out))
        if unknown:
            raise TypeError(f"section {self.key!r} has no setting {', '.join(unknown)} (it has {', '.join(sorted(out))})")
        out.update({k: v for k, v in overrides.items() if v is not None})
        return out

    def run(self, lm, ctx: RunContext, *, inputs: Mapping[str, Any] | None = None, **overrides):
        """All of the chapter's runs for ``lm`` as one report (cached on disk where they are heavy), at the sizes
        of ``ctx``'s configuration with ``overrides``; ``inputs`` holds the reports of :attr:`inputs`
        (:func:`helpers.results.input_reports` makes them)."""
        inputs = dict(inputs or {})
        missing = [k for k in self.inputs if k not in inputs]
        if missing:
            raise ValueError(f"section {self.key!r} reads the reports of {', '.join(missing)}: pass them as "
                             "inputs={key: report} (helpers.results.input_reports(section, lm, ctx) makes them)")
        with ctx.active():
            return self.runner(lm, ctx, self.settings(ctx, **overrides), {k: inputs[k] for k in self.inputs})
