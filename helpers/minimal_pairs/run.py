"""The minimal-pairs chapter's runs (definitions: book/methods.md, §Minimal pairs): BLiMP's pairs scored by the model
(its own grammar), then with the paper's heads removed, against controls, and every head ranked for the phenomena the
paper's heads are matched with.

The paper's heads (:func:`paper_heads`) come from the §4.2 and §4.3 runs of the same model (their reports, chosen on
dev): the best head of each of Table 1's relations and the coreference head. Three groups are matched with the
phenomena their relation should carry (:data:`GROUPS`): the det head with determiner-noun agreement; the nsubj, aux and
cop heads together with subject-verb agreement (in UD the inflected verb is often the auxiliary or copula, which nsubj
does not attach to); the coreference head with anaphor agreement and binding.

Pairs: each chosen paradigm's first ``pairs`` pairs for the model's grammar, the first ``head_pairs`` of those for the
heads (a group's *target* pairs: those of its phenomena). Conditions, each a set of heads removed (zeroed, or replaced
by their mean context: ``mean``), scored on a set of pairs beside the unmasked model in the same passes:

- ``zero:KEY``: each paper head alone, and each group's set, on every head pair (the head x phenomenon matrix);
- ``layer:GROUP:K``: ``draws`` sets like the group's, layer for layer (:func:`~helpers.minimal_pairs.stats.layer_matched`),
  on its target pairs;
- ``others:GROUP:K`` (a group of several heads): ``draws`` sets of as many other paper heads, on its target pairs (a
  group of one is compared with every other paper head of the matrix);
- ``top:GROUP:L-H``: the heads of largest importance (``|d margin / d xi|`` on the target pairs, one backward pass a
  batch), each alone, on the target pairs;
- ``mean:GROUP``: the group's set with its heads' contexts replaced by their mean over the good sentences of the
  chosen pairs (every position), on its target pairs.

A decoder's pairs are scored from the first token where the two sentences differ (:func:`~helpers.minimal_pairs.scoring.
margin_rows`: the tokens before it cancel in the margin).

The run is cut into tasks (:func:`tasks`), run here or on a Dask cluster (:func:`helpers.pipeline.engine.map_tasks`):
the same tasks with the same passes either way, so the results are identical; the top heads and mean ablation (which
read the importance and the means) run as a second round. Cached per model, data, settings and code.

>>> run = run_pairs(lm, ctx, pairs=20, head_pairs=5, heads=paper_heads(syntax, coref))     # doctest: +SKIP
>>> summary = summarise(run)                                                                 # doctest: +SKIP
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch

from helpers.context import RunContext
from helpers.core.bootstrap import percentile_interval
from helpers.core.labels import head_label, parse_head_label
from helpers.core.models import LoadedModel
from helpers.minimal_pairs import stats
from helpers.minimal_pairs.scoring import (
    ContextSums,
    Rows,
    budget_for,
    encode,
    head_dim,
    margin_rows,
    margin_gradients,
    not_scorable_reason,
    own_head,
    removal_mask,
    scorer_kind,
    text_scores,
)

# The groups of paper heads and the phenomena (BLiMP's linguistics_term) each is matched with.
GROUPS: tuple[str, ...] = ("det", "sva", "coref")
GROUP_RELATIONS = {"det": ("det",), "sva": ("nsubj", "aux", "cop"), "coref": ()}  # coref: §4.3's head
GROUP_TARGETS = {"det": ("determiner_noun_agreement",), "sva": ("subject_verb_agreement",),
                 "coref": ("anaphor_agreement", "binding")}
COREF = "coref"          # how the §4.3 head is named among the relations
TOP = 10                 # heads of largest importance removed exactly, per group
DRAWS = 8                # control sets per group (same-layer; other paper heads)
METHOD = "full"          # the chapter scores whole sentences (BLiMP's own method)
TASK_PAIRS = 64          # pairs a task (of similar length: little padding), on this process or a Dask worker
# What the §4.2 and §4.3 runs read to choose the paper's heads (their dev sets): the corpora a run with heads needs.
HEAD_READS = ("gum:dev", "ontogum:dev")
ACCELERATOR_HEAD_PAIRS = 100  # pairs per paradigm for the heads on an accelerator (the grammar: all 1,000)


# ------------------------------------------------------------------------------------ the paper's heads


def paper_heads(syntax, coref) -> dict:
    """``{"relations": {relation: "L-H"}, "coref": "L-H"}`` (1-based labels): the best head on GUM dev of each of
    Table 1's relations (the §4.2 report's ``best_heads()``) and of each relation of :data:`GROUP_RELATIONS` that GUM
    dev has (its scores' table), and the §4.3 report's best antecedent-selection head on OntoGUM dev."""
    table = syntax.dev.scores.table()
    relations = dict(syntax.best_heads())
    for group in GROUP_RELATIONS.values():
        for rel in group:
            if rel not in relations and rel in table and table[rel].get("best_head"):
                relations[rel] = table[rel]["best_head"]
    return {"relations": relations, "coref": head_label(*coref.dev.best_head())}


@dataclass(frozen=True)
class Row:
    """A row of the head x phenomenon matrix: ``key`` (``"24-7"``, or a group's name for a set), ``heads`` (0-based),
    ``label`` (the heads and what they are: ``"24-7 (det)"``)."""

    key: str
    heads: tuple[tuple[int, int], ...]
    label: str


def group_heads(heads: dict) -> dict[str, tuple[tuple[int, int], ...]]:
    """Each group's set of heads (0-based, distinct, sorted); a group whose relations have no head is left out."""
    out = {}
    for group in GROUPS:
        labels = [heads["coref"]] if group == COREF else [heads["relations"][r] for r in GROUP_RELATIONS[group]
                                                          if r in heads["relations"]]
        if labels and all(labels):
            out[group] = tuple(sorted({parse_head_label(x) for x in labels}))
    return out


def matrix_rows(heads: dict) -> list[Row]:
    """The matrix's rows: every distinct paper head alone (by layer, then head), labelled with its relations (and
    ``coref``), then each group of several heads as a set."""
    named: dict[tuple[int, int], list[str]] = {}
    for rel, label in heads["relations"].items():
        named.setdefault(parse_head_label(label), []).append(rel)
    if heads.get("coref"):
        named.setdefault(parse_head_label(heads["coref"]), []).append(COREF)
    rows = [Row(head_label(*h), (h,), f"{head_label(*h)} ({', '.join(named[h])})") for h in sorted(named)]
    for group, hs in group_heads(heads).items():
        if len(hs) > 1:
            rels = "+".join(r for r in GROUP_RELATIONS[group] if r in heads["relations"])
            rows.append(Row(group, hs, f"{rels} ({', '.join(head_label(*h) for h in hs)})"))
    return rows


# ------------------------------------------------------------------------------------ the pairs


@dataclass
class Selection:
    """The chosen pairs: ``pairs`` (BLiMP rows, each paradigm's first ``max(pairs, head_pairs)``), ``paradigm`` (each
    pair's index into ``paradigms``), ``phenomenon_of`` (paradigm -> phenomenon), and the indices of the ``grammar``
    and ``head`` pairs."""

    paradigms: list[str]
    phenomenon_of: dict[str, str]
    pairs: list[dict]
    paradigm: np.ndarray
    grammar: np.ndarray
    head: np.ndarray
    files: list = field(default_factory=list, repr=False)

    @property
    def phenomena(self) -> list[str]:
        """The chosen phenomena, sorted by name."""
        return sorted(set(self.phenomenon_of[p] for p in self.paradigms))

    def of(self, phenomena: Sequence[str]) -> list[int]:
        """The indices (into ``paradigms``) of the paradigms of ``phenomena``."""
        return [k for k, p in enumerate(self.paradigms) if self.phenomenon_of[p] in phenomena]

    def targets(self, group: str) -> np.ndarray:
        """The head pairs of ``group``'s phenomena."""
        chosen = self.of(GROUP_TARGETS[group])
        return self.head[np.isin(self.paradigm[self.head], chosen)]


def select(ctx: RunContext, *, paradigms: Sequence[str] | None, phenomena: Sequence[str] | None, pairs: int | None,
           head_pairs: int | None) -> Selection:
    """The :class:`Selection` of the chosen paradigms (by name; both ``None``: all) from the corpora folder of
    ``ctx``; ``pairs`` / ``head_pairs`` per paradigm (``None``: all)."""
    from helpers.data.blimp import load_pairs, paradigm_paths, phenomena_of, select_paradigms

    table = phenomena_of(ctx.data_dir)
    names = select_paradigms(paradigms=paradigms, phenomena=phenomena, data_dir=ctx.data_dir)
    most = None if pairs is None or head_pairs is None else max(pairs, head_pairs)
    rows, paradigm, grammar, head = [], [], [], []
    for k, name in enumerate(names):
        mine = load_pairs([name], max_pairs=most, data_dir=ctx.data_dir)
        start = len(rows)
        rows.extend(mine)
        paradigm += [k] * len(mine)
        grammar += range(start, start + (len(mine) if pairs is None else min(pairs, len(mine))))
        head += range(start, start + (len(mine) if head_pairs is None else min(head_pairs, len(mine))))
    return Selection(names, {n: table[n] for n in names}, rows, np.asarray(paradigm), np.asarray(grammar),
                     np.asarray(head),
                     paradigm_paths(names, ctx.data_dir))


# ------------------------------------------------------------------------------------ conditions and tasks


@dataclass(frozen=True)
class Condition:
    """Heads removed on a set of pairs: ``name``, ``heads`` (0-based), ``fill`` (``"zero"`` or ``"mean"``) and ``on``
    (``"heads"``: every head pair; a group: its target pairs)."""

    name: str
    heads: tuple[tuple[int, int], ...]
    fill: str = "zero"
    on: str = "heads"


def first_conditions(heads: dict, n_heads: int, *, draws: int, seed: int) -> list[Condition]:
    """The conditions of the first round: the matrix's rows, each group's same-layer sets and (a group of several
    heads) its sets of other paper heads."""
    rows = matrix_rows(heads)
    out = [Condition(f"zero:{r.key}", r.heads) for r in rows]
    singles = sorted({r.heads[0] for r in rows if len(r.heads) == 1})
    for g, hs in group_heads(heads).items():
        for k, s in enumerate(stats.layer_matched(hs, n_heads, draws, seed=seed)):
            out.append(Condition(f"layer:{g}:{k}", s, on=g))
        if len(hs) > 1:
            pool = [h for h in singles if h not in hs]
            for k, s in enumerate(stats.draw_others(pool, len(hs), draws, seed=seed + 1)):
                out.append(Condition(f"others:{g}:{k}", s, on=g))
    return out


def importance(selection: Selection, group: str, grads: np.ndarray) -> np.ndarray:
    """``[layer, head]``: the mean over ``group``'s target pairs of ``|d margin / d xi|`` (``grads`` ``[pair, layer,
    head]``; Michel et al.'s importance with the margin as the objective)."""
    return np.abs(grads).mean(0)


def top_heads(scores: np.ndarray, n: int = TOP) -> list[tuple[int, int]]:
    """The ``n`` heads of largest ``scores`` ``[layer, head]``, largest first (ties: the lower layer, then head)."""
    order = sorted(np.ndindex(*scores.shape), key=lambda lh: (-scores[lh], lh))
    return [(int(l), int(h)) for l, h in order[:n]]


def second_conditions(heads: dict, importances: dict[str, np.ndarray], done: list[Condition]) -> list[Condition]:
    """The second round: each group's top heads by importance (``importances``: per group ``[layer, head]``) not yet
    removed alone on its target pairs (a matrix row, or a same-layer set of one head), and each group's mean
    ablation."""
    out = []
    for g, hs in group_heads(heads).items():
        have = {c.heads for c in done if len(c.heads) == 1 and c.fill == "zero" and c.on in ("heads", g)}
        for h in top_heads(importances[g]) if g in importances else []:
            if (h,) not in have:
                out.append(Condition(f"top:{g}:{head_label(*h)}", (h,), on=g))
        out.append(Condition(f"mean:{g}", hs, fill="mean", on=g))
    return out


def single_head_source(group: str, head: tuple[int, int], conditions: Sequence[Condition]) -> Condition | None:
    """The condition that removed ``head`` alone on (a superset of) ``group``'s target pairs."""
    for c in conditions:
        if c.heads == (head,) and c.fill == "zero" and c.on in ("heads", group):
            return c
    return None


def chunks(pairs: np.ndarray, lengths: np.ndarray, size: int = TASK_PAIRS) -> list[tuple]:
    """``pairs`` (indices) in order of their length (``lengths``: per pair, the longer sentence's tokens; ties by index),
    cut into tasks of ``size`` pairs: the passes of a task then pad little."""
    order = sorted((int(i) for i in pairs), key=lambda i: (int(lengths[i]), i))
    return [tuple(order[k:k + size]) for k in range(0, len(order), size)]


def tasks(selection: Selection, conditions: Sequence[Condition], groups: Sequence[str], lengths: np.ndarray, *,
          grammar: bool, gradients: bool, size: int = TASK_PAIRS) -> list[tuple]:
    """The run's independent tasks, in order: ``("grammar", pairs)`` over the grammar pairs; ``("conditions", names,
    pairs)`` for the conditions on every head pair and for each group's on its target pairs; ``("gradient", group,
    pairs)`` per group. ``pairs``: indices into ``selection.pairs`` (a tuple), in :func:`chunks` of ``size`` pairs of
    similar length."""
    out: list[tuple] = []
    if grammar:
        out += [("grammar", c) for c in chunks(selection.grammar, lengths, size)]
    every = tuple(c.name for c in conditions if c.on == "heads")
    if every:
        out += [("conditions", every, c) for c in chunks(selection.head, lengths, size)]
    for g in groups:
        mine = tuple(c.name for c in conditions if c.on == g)
        if mine:
            out += [("conditions", mine, c) for c in chunks(selection.targets(g), lengths, size)]
    if gradients:
        out += [("gradient", g, c) for g in groups for c in chunks(selection.targets(g), lengths, size)]
    return [t for t in out if t[-1]]


def _texts(pairs: Sequence[int], n_pairs: int) -> np.ndarray:
    idx = np.asarray(pairs, dtype=np.int64)
    return np.concatenate([idx, idx + n_pairs])


def run_task(lm: LoadedModel, shared: dict, task: tuple) -> dict[str, np.ndarray]:
    """One task's arrays: ``"grammar"`` -> ``{"scores" [2n] (good, then bad), "sums" [heads, d], "count"}``;
    ``"conditions"`` -> ``{"trunk" [2n], NAME [2n] ...}``; ``"gradient"`` -> ``{"grads" [n, layer, head]}``."""
    rows: Rows = shared["rows"]
    n_pairs = rows.n_texts // 2
    kind, pairs = task[0], task[-1]
    sub = rows.subset(_texts(pairs, n_pairs))
    L, H = lm.n_layers, lm.n_heads
    if kind == "grammar":
        capture = shared["capture"]
        sums = None
        if capture:
            sums = ContextSums(lm, capture, np.arange(sub.n_texts) < len(pairs))   # the good sentences
        scores = text_scores(lm, sub, capture=sums)[0]
        d = head_dim(lm)
        total = np.stack([sums.sums.get(h, torch.zeros(d)).numpy() for h in capture]) if capture else np.zeros((0, d))
        return {"scores": scores, "sums": total, "count": np.array(0 if sums is None else sums.count)}
    if kind == "conditions":
        conditions = [shared["conditions"][name] for name in task[1]]
        masks = torch.stack([torch.ones(L, H)] + [removal_mask(L, H, c.heads) for c in conditions])
        fills = {c.fill for c in conditions}
        if len(fills) > 1:
            raise ValueError(f"task {task[1]}: zero and mean conditions in one task")
        fill = shared["fill"] if fills == {"mean"} else None
        scores = text_scores(lm, sub, masks, fill=fill)
        return {"trunk": scores[0], **{c.name: scores[k + 1] for k, c in enumerate(conditions)}}
    if kind == "gradient":
        grads, _ = margin_gradients(lm, sub)
        return {"grads": grads}
    raise ValueError(f"unknown minimal-pairs task {task!r}")


# ------------------------------------------------------------------------------------ the run


@dataclass
class PairsRun:
    """A run's selection, its ``heads`` (:func:`paper_heads`; ``None``: no head analysis), its ``conditions`` (both
    rounds), the ``arrays`` (cached: ``grammar`` [2, pairs], ``cond/NAME`` and ``base/NAME`` [2, pairs on], ``grad/GROUP``
    [pairs, layer, head], ``means`` [heads captured, d], ``mean_count``), the scorer's ``kind``, why the model cannot
    score (``reason``; then nothing else is computed) and the settings."""

    model: str
    selection: Selection
    heads: dict | None
    conditions: list[Condition]
    arrays: dict[str, np.ndarray]
    kind: str
    reason: str | None
    settings: dict
    n_layers: int
    n_heads: int

    def pairs_on(self, on: str) -> np.ndarray:
        """The pairs a condition ``on`` is scored on."""
        return self.selection.head if on == "heads" else self.selection.targets(on)


def run_pairs(lm: LoadedModel, ctx: RunContext, *, paradigms: Sequence[str] | None = None,
              phenomena: Sequence[str] | None = None, pairs: int | None, head_pairs: int | None,
              heads: dict | None = None, draws: int = DRAWS, seed: int = 0) -> PairsRun:
    """The chapter's scores (cached): the grammar pairs unmasked; with ``heads`` (:func:`paper_heads`), every
    condition of both rounds and each group's importance. An encoder without its own masked-LM head is not scored
    (``reason``)."""
    from helpers.data.cache import cached_arrays
    from helpers.data.corpora import file_digest
    from helpers.digest import code_digest

    selection = select(ctx, paradigms=paradigms, phenomena=phenomena, pairs=pairs, head_pairs=head_pairs)
    settings = {"paradigms": selection.paradigms, "pairs": pairs, "head_pairs": head_pairs, "draws": draws,
                "seed": seed, "method": METHOD}
    head = own_head(lm)
    reason = not_scorable_reason(lm, head)
    L, H = lm.n_layers, lm.n_heads
    if reason:
        return PairsRun(lm.label, selection, heads, [], {}, scorer_kind(lm), reason, settings, L, H)
    first = first_conditions(heads, H, draws=draws, seed=seed) if heads else []
    key = {"model": lm.fingerprint(), "data": file_digest(selection.files), "settings": settings, "heads": heads,
           "code": code_digest(run_pairs)}
    box: dict[str, Any] = {}

    def compute() -> dict[str, np.ndarray]:
        arrays, conditions = _compute(lm, ctx, selection, heads, first, head)
        box["conditions"] = conditions
        return arrays

    arrays = cached_arrays("minimal_pairs", key, compute, cache_root=ctx.cache_dir)
    conditions = box.get("conditions")
    if conditions is None:  # read back: the second round's conditions follow from the importance kept
        imps = {g: importance(selection, g, arrays[f"grad/{g}"]) for g in GROUPS if f"grad/{g}" in arrays}
        conditions = first + (second_conditions(heads, imps, first) if heads else [])
    return PairsRun(lm.label, selection, heads, conditions, arrays, scorer_kind(lm), None, settings, L, H)


def _compute(lm: LoadedModel, ctx: RunContext, selection: Selection, heads: dict | None,
             first: list[Condition], head) -> tuple[dict[str, np.ndarray], list[Condition]]:
    from helpers.pipeline.engine import map_tasks

    rows = margin_rows(encode(lm, selection.pairs, METHOD, head=head))  # a decoder: the tokens that can differ
    n = len(selection.pairs)
    groups = [g for g in group_heads(heads)] if heads else []
    capture = sorted({h for g in groups for h in group_heads(heads)[g]}) if heads else []
    shared = {"rows": rows, "conditions": {c.name: c for c in first}, "fill": None, "capture": capture}
    tokens = np.zeros(rows.n_texts, dtype=np.int64)
    np.maximum.at(tokens, rows.text, [len(ids) for ids in rows.ids])
    lengths = np.maximum(tokens[:n], tokens[n:])  # per pair, its longer sentence's input
    size = budget_for(lm, TASK_PAIRS)  # an accelerator's tasks fill its larger passes
    todo = tasks(selection, first, groups, lengths, grammar=True, gradients=bool(heads), size=size)
    done = map_tasks(lm, execution=ctx.execution, task=run_task, shared=shared, payloads=todo, desc="pairs",
                     progress=ctx.progress)
    arrays: dict[str, np.ndarray] = {}
    scores = np.full(2 * n, np.nan)
    sums, count = None, 0
    for task, out in zip(todo, done):
        if task[0] == "grammar":
            scores[_texts(task[-1], n)] = out["scores"]
            sums = out["sums"] if sums is None else sums + out["sums"]
            count += int(out["count"])
    arrays["grammar"] = np.stack([scores[selection.grammar], scores[selection.grammar + n]])
    _collect(arrays, todo, done, selection, first, n)
    if not heads:
        return arrays, []
    imps = {g: importance(selection, g, arrays[f"grad/{g}"]) for g in groups if f"grad/{g}" in arrays}
    second = second_conditions(heads, imps, first)
    means = torch.zeros(lm.n_layers, lm.n_heads, head_dim(lm))
    for k, (l, h) in enumerate(capture):
        means[l, h] = torch.from_numpy(sums[k] / max(count, 1)).float()
    arrays["means"] = np.stack([means[l, h].numpy() for l, h in capture]) if capture else np.zeros((0, head_dim(lm)))
    arrays["mean_count"] = np.array(count)
    shared = {"rows": rows, "conditions": {c.name: c for c in second}, "fill": means, "capture": []}
    zero = [c for c in second if c.fill == "zero"]
    mean = [c for c in second if c.fill == "mean"]
    todo = tasks(selection, zero, groups, lengths, grammar=False, gradients=False, size=size) + \
        tasks(selection, mean, groups, lengths, grammar=False, gradients=False, size=size)
    done = map_tasks(lm, execution=ctx.execution, task=run_task, shared=shared, payloads=todo, desc="pairs (2)",
                     progress=ctx.progress)
    _collect(arrays, todo, done, selection, second, n)
    return arrays, first + second


def _collect(arrays: dict, todo: list[tuple], done: list[dict], selection: Selection, conditions: list[Condition],
             n: int) -> None:
    """The conditions' scores (and their passes' unmasked scores) and the gradients of ``done`` into ``arrays``, each
    in the order of its pairs (:meth:`PairsRun.pairs_on`)."""
    names = {c.name: c for c in conditions}
    scores: dict[str, np.ndarray] = {}
    for task, out in zip(todo, done):
        if task[0] == "conditions":
            texts = _texts(task[-1], n)
            for name in task[1]:
                for prefix, value in (("cond", out[name]), ("base", out["trunk"])):
                    full = scores.setdefault(f"{prefix}/{name}", np.full(2 * n, np.nan))
                    full[texts] = value
        elif task[0] == "gradient":
            grads = scores.setdefault(f"grad/{task[1]}", {})
            grads.update(zip(task[-1], out["grads"]))
    for key in [k for k in scores if k.startswith("grad/")]:
        got = scores.pop(key)
        arrays[key] = np.stack([got[int(i)] for i in selection.targets(key.split("/", 1)[1])])
    for key, full in scores.items():
        c = names[key.split("/", 1)[1]]
        idx = selection.head if c.on == "heads" else selection.targets(c.on)
        arrays[key] = np.stack([full[idx], full[idx + n]])


# ------------------------------------------------------------------------------------ the summary


def _est(values, paradigm, chosen, n_boot, seed) -> dict:
    """:func:`~helpers.minimal_pairs.stats.estimate` of the pairs of ``values`` whose paradigm is one of ``chosen``."""
    keep = np.isin(paradigm, list(chosen))
    return stats.estimate(np.asarray(values)[keep], n_boot=n_boot, seed=seed)


def grammar_summary(run: PairsRun, published: dict | None = None, *, n_boot: int = stats.BOOTSTRAP,
                    seed: int = 0) -> dict:
    """The model's own grammar: per paradigm, per phenomenon and over the selection, accuracy and mean margin (nats)
    with their intervals, beside the published figures of the same paradigms (their mean over the paradigms)."""
    sel = run.selection
    good, bad = run.arrays["grammar"]
    paradigm = sel.paradigm[sel.grammar]
    acc, margin = stats.correct(good, bad), good - bad

    def entry(chosen: list[int]) -> dict:
        out = {"n": int(np.isin(paradigm, chosen).sum()), "paradigms": len(chosen)}
        for name, values, scale in (("accuracy", acc, 100.0), ("margin", margin, 1.0)):
            e = _est(values, paradigm, chosen, n_boot, seed)
            out[name] = None if e["value"] is None else scale * e["value"]
            out[f"{name}_interval"] = None if e["interval"] is None else [scale * x for x in e["interval"]]
        if published:
            names = [sel.paradigms[k] for k in chosen]
            out["published"] = {
                **{m: 100 * float(np.mean([published["models"][p][m] for p in names]))
                   for m in published["model_names"] if all(p in published["models"] for p in names)},
                **({"human": 100 * float(np.mean([published["human"][p] for p in names]))}
                   if all(p in published["human"] for p in names) else {})}
        return out

    return {"paradigms": [{"paradigm": p, "phenomenon": sel.phenomenon_of[p], **entry([k])}
                          for k, p in enumerate(sel.paradigms)],
            "phenomena": [{"phenomenon": t, **entry(sel.of([t]))} for t in sel.phenomena],
            "overall": entry(list(range(len(sel.paradigms))))}


def _change(run: PairsRun, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(d margin, d correct, base margin, paradigm)`` per pair of condition ``name``."""
    c = next(c for c in run.conditions if c.name == name)
    new, base = run.arrays[f"cond/{name}"], run.arrays[f"base/{name}"]
    idx = run.pairs_on(c.on)
    return ((new[0] - new[1]) - (base[0] - base[1]), stats.correct(*new) - stats.correct(*base), base[0] - base[1],
            run.selection.paradigm[idx])


def _restricted(run: PairsRun, name: str, group: str):
    """:func:`_change` of ``name`` on ``group``'s target pairs (a condition on every head pair cut to them)."""
    dm, dc, bm, par = _change(run, name)
    c = next(c for c in run.conditions if c.name == name)
    if c.on == "heads":
        keep = np.isin(run.selection.head, run.selection.targets(group))
        return dm[keep], dc[keep], bm[keep], par[keep]
    return dm, dc, bm, par


def matrix(run: PairsRun, *, n_boot: int = stats.BOOTSTRAP, seed: int = 0) -> dict:
    """The head x phenomenon matrix: per row (:func:`matrix_rows`) and phenomenon, the change in mean margin (nats) and
    in accuracy (points) with the row's heads removed, paired intervals over pairs."""
    sel = run.selection
    rows = matrix_rows(run.heads)
    cells = []
    for r in rows:
        dm, dc, _, par = _change(run, f"zero:{r.key}")
        line = []
        for t in sel.phenomena:
            chosen = sel.of([t])
            m, a = _est(dm, par, chosen, n_boot, seed), _est(dc, par, chosen, n_boot, seed)
            line.append({"margin": m["value"], "margin_interval": m["interval"],
                         "accuracy": None if a["value"] is None else 100 * a["value"],
                         "accuracy_interval": None if a["interval"] is None else [100 * x for x in a["interval"]],
                         "n": m["n"]})
        cells.append(line)
    return {"rows": [{"key": r.key, "label": r.label, "heads": [head_label(*h) for h in r.heads]} for r in rows],
            "phenomena": sel.phenomena, "cells": cells}


def group_summary(run: PairsRun, group: str, *, n_boot: int = stats.BOOTSTRAP, seed: int = 0) -> dict:
    """What a group's claim reads: the removal's change on its targets and off them, the differences against the
    same-layer sets and against the other paper heads (paired over the target pairs), against off-target phenomena
    (two samples), mean ablation beside zero, and the ranking of every head by importance with the top heads removed.
    ``None`` entries where the selection lacks what a part needs (says ``missing``)."""
    sel = run.selection
    hs = group_heads(run.heads)[group]
    key = head_label(*hs[0]) if len(hs) == 1 else group
    targets = sel.of(GROUP_TARGETS[group])
    off = [k for k in range(len(sel.paradigms)) if k not in targets]
    out: dict[str, Any] = {"heads": [head_label(*h) for h in hs], "targets": list(GROUP_TARGETS[group]),
                           "relations": [r for r in GROUP_RELATIONS[group] if r in run.heads["relations"]] or [COREF],
                           "missing": None}
    if not targets:
        out["missing"] = f"no paradigm of {', '.join(GROUP_TARGETS[group])} was chosen"
        return out
    dm, dc, bm, par = _restricted(run, f"zero:{key}", group)
    est = lambda v: _est(v, par, targets, n_boot, seed)  # noqa: E731
    out["base_margin"], out["removed"] = est(bm), est(dm)
    out["removed_accuracy"] = {k: (None if v is None else ([100 * x for x in v] if isinstance(v, list) else 100 * v))
                               if k != "n" else v for k, v in est(dc).items()}

    def against(names: list[str]) -> dict | None:
        """The control sets ``names`` removed, on the group's targets, their mean beside the group's removal."""
        if not names:
            return None
        controls = np.mean([_restricted(run, n, group)[0] for n in names], axis=0)
        return {"sets": [[head_label(*h) for h in c.heads] for c in run.conditions if c.name in names],
                "removed": est(controls), "difference": est(dm - controls)}

    out["same_layer"] = against([c.name for c in run.conditions if c.name.startswith(f"layer:{group}:")])
    if len(hs) == 1:
        others = [f"zero:{r.key}" for r in matrix_rows(run.heads) if len(r.heads) == 1 and r.heads != hs]
    else:
        others = [c.name for c in run.conditions if c.name.startswith(f"others:{group}:")]
    out["others"] = against(others)
    full_dm, _, _, full_par = _change(run, f"zero:{key}")
    out["off_target"] = None if not off else {
        "removed": _est(full_dm, full_par, off, n_boot, seed),
        "difference": stats.two_sample(full_dm[np.isin(full_par, targets)], full_dm[np.isin(full_par, off)],
                                       n_boot=n_boot, seed=seed)}
    mean = _change(run, f"mean:{group}")
    out["mean_ablation"] = {"target": _est(mean[0], mean[3], targets, n_boot, seed), "zero_target": out["removed"],
                            "difference": _est(mean[0] - dm, mean[3], targets, n_boot, seed),
                            "reference_positions": int(run.arrays["mean_count"])}
    out["ranking"] = ranking(run, group, n_boot=n_boot, seed=seed)
    return out


def ranking(run: PairsRun, group: str, *, n_boot: int = stats.BOOTSTRAP, seed: int = 0) -> dict:
    """Every head ranked for ``group``'s target pairs: ``importance`` ``[layer][head]`` (mean over pairs of ``|d
    margin / d xi|``), ``first_order`` (``-mean d margin / d xi``, the first-order estimate of removing the head), the
    group's heads' percentiles by importance with intervals, and ``top``: the :data:`TOP` heads by importance and the
    group's heads, each removed exactly (its change in margin on the targets), with the group's heads' ranks among
    them."""
    sel = run.selection
    grads = run.arrays[f"grad/{group}"]
    par = sel.paradigm[sel.targets(group)]
    targets = sel.of(GROUP_TARGETS[group])
    imp = np.abs(grads)
    scores = importance(sel, group, grads)
    first_order = -grads.mean(0)
    chosen = top_heads(scores)
    H = run.n_heads
    percentiles = {}
    for l, h in group_heads(run.heads)[group]:
        reps = stats.percentile_replicates(imp, l * H + h, n_boot=n_boot, seed=seed)
        percentiles[head_label(l, h)] = {"value": stats.percentile_of(scores, l * H + h),
                                         "interval": list(percentile_interval(reps))}
    top = []
    for h in dict.fromkeys([*chosen, *group_heads(run.heads)[group]]):
        source = single_head_source(group, h, run.conditions)
        if source is None:
            continue
        dm, _, _, p = _restricted(run, source.name, group)
        top.append({"head": head_label(*h), "importance": float(scores[h]),
                    "first_order": float(first_order[h]),
                    "margin": _est(dm, p, targets, n_boot, seed),
                    "top": h in chosen})
    order = sorted(range(len(top)), key=lambda k: (top[k]["margin"]["value"], k))  # the largest drop first
    for rank, k in enumerate(order, start=1):
        top[k]["rank"] = rank
    return {"importance": scores.tolist(), "first_order": first_order.tolist(), "percentiles": percentiles,
            "top": top, "n": int(len(par))}


def summarise(run: PairsRun, published: dict | None = None, *, n_boot: int = stats.BOOTSTRAP, seed: int = 0) -> dict:
    """The chapter's numbers (every interval a bootstrap over the pairs it reads): ``grammar``
    (:func:`grammar_summary`); with heads, ``heads`` (the paper's, 1-based, and the groups), ``matrix`` and
    ``groups`` (:func:`group_summary`); a model that cannot score: ``reason`` and nothing else."""
    if run.reason:
        return {"reason": run.reason, "grammar": None, "heads": None, "matrix": None, "groups": None}
    out: dict[str, Any] = {"reason": None, "grammar": grammar_summary(run, published, n_boot=n_boot, seed=seed),
                           "heads": None, "matrix": None, "groups": None}
    if run.heads:
        out["heads"] = {**run.heads, "groups": {g: [head_label(*h) for h in hs]
                                                for g, hs in group_heads(run.heads).items()}}
        out["matrix"] = matrix(run, n_boot=n_boot, seed=seed)
        out["groups"] = {g: group_summary(run, g, n_boot=n_boot, seed=seed) for g in group_heads(run.heads)}
    return out
