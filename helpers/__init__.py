"""Reproduce "What Does BERT Look At?" (Clark et al., 2019) on any BERT-family model and UD treebank.

Shapes, everywhere: one example's attention is ``[layer, head, query, key]`` with rows summing to 1
over ``key``; per-head statistics are ``[layer, head]``; head labels in text are 1-based ``"L-H"``.

>>> import helpers
>>> lm = helpers.load_model()                              # offline default: all-MiniLM-L6-v2
>>> sents = helpers.load_treebank("gum:test", max_sentences=50)
>>> batch = helpers.encode_words(lm.tokenizer, [s.words for s in sents])
>>> store = helpers.extract(lm, batch, level="word")       # cached on disk, streamed back
>>> for example, attn in store:                            # attn: [layer, head, word, word]
...     pass
"""
from helpers.data.cache import AttentionStore
from helpers.pipeline.extraction import extract
from helpers.config import cache_dir, data_dir, small_run
from helpers.data.conllu_io import ConllError, Sentence, read_conllu
from helpers.data.corpora import Document, load_gum, load_treebank
from helpers.core.encoding import Encoded, EncodedBatch, encode_ids, encode_texts, encode_words
from helpers.presentation import charts, views  # helpers.charts.save_chart, helpers.views.load_javascript
from helpers.presentation.explore import explore
from helpers.core.extract import attention_for, iter_attention
from helpers.core.labels import head_label, parse_head_label
from helpers.core.models import DEFAULT_MODEL, LoadedModel, load_model
from helpers.core.errors import ModelNotAvailableError
from helpers.data.segments import Segment, encode_segments, paper_segments
from helpers.core.wordlevel import word_level

__all__ = [
    "AttentionStore", "attention_for", "charts", "explore", "views", "ConllError", "DEFAULT_MODEL", "Document", "Encoded", "EncodedBatch",
    "LoadedModel", "ModelNotAvailableError", "Segment", "Sentence", "cache_dir", "data_dir",
    "encode_ids", "encode_segments", "encode_texts", "encode_words", "extract", "head_label",
    "iter_attention", "load_gum", "load_model", "load_treebank", "paper_segments",
    "parse_head_label", "read_conllu", "small_run", "word_level",
]
