"""Reproduce "What Does BERT Look At?" (Clark et al., 2019) on any BERT-family model and UD treebank.

Shapes, everywhere: one example's attention is ``[layer, head, query, key]`` with rows summing to 1
over ``key``; per-head statistics are ``[layer, head]``; head labels in text are 1-based ``"L-H"``.
How maps become a chapter's numbers, and how to add a statistic: helpers/README.md.

>>> import helpers
>>> lm = helpers.load_model()                              # offline default: all-MiniLM-L6-v2
>>> sents = helpers.load_treebank("gum:test", max_sentences=50)
>>> batch = helpers.encode_words(lm.tokenizer, [s.words for s in sents])
>>> store = helpers.extract(lm, batch, level="word")       # cached on disk, streamed back
>>> for example, attn in store:                            # attn: [layer, head, word, word]
...     pass

The names below (the notebook API of the README) are loaded when first used, so ``import helpers``
and any ``helpers.core`` module stay cheap: no pandas, plotting or presentation code until asked for.
"""
from __future__ import annotations

import importlib
import importlib.util

# Public name -> the module that defines it (``charts`` and ``views`` are modules themselves).
EXPORTS: dict[str, str] = {
    "AttentionStore": "helpers.data.cache",
    "extract": "helpers.pipeline.extraction",
    "cache_dir": "helpers.config", "data_dir": "helpers.config", "small_run": "helpers.config",
    "ConllError": "helpers.data.conllu_io", "Sentence": "helpers.data.conllu_io", "read_conllu": "helpers.data.conllu_io",
    "Document": "helpers.data.corpora", "load_gum": "helpers.data.corpora", "load_treebank": "helpers.data.corpora",
    "Encoded": "helpers.core.encoding", "EncodedBatch": "helpers.core.encoding", "encode_ids": "helpers.core.encoding",
    "encode_texts": "helpers.core.encoding", "encode_words": "helpers.core.encoding",
    "charts": "helpers.presentation.charts",   # helpers.charts.save_chart
    "views": "helpers.presentation.views",     # helpers.views.load_javascript
    "explore": "helpers.presentation.explore",
    "attention_for": "helpers.core.extract", "iter_attention": "helpers.core.extract",
    "head_label": "helpers.core.labels", "parse_head_label": "helpers.core.labels",
    "DEFAULT_MODEL": "helpers.core.models", "LoadedModel": "helpers.core.models", "load_model": "helpers.core.models",
    "ModelNotAvailableError": "helpers.core.errors",
    "Segment": "helpers.data.segments", "encode_segments": "helpers.data.segments", "paper_segments": "helpers.data.segments",
    "word_level": "helpers.core.wordlevel",
}
_MODULES = {"charts", "views"}  # exported as modules, not as a name inside one

__all__ = sorted(EXPORTS)


def __getattr__(name: str):
    """Load a public name on first use (then it is an ordinary attribute); ``helpers.core`` and the other
    sub-packages are imported on first use too."""
    if name in EXPORTS:
        module = importlib.import_module(EXPORTS[name])
        value = module if name in _MODULES else getattr(module, name)
    elif not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module 'helpers' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(EXPORTS))
