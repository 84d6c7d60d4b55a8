"""Explore a sentence you type: its head view, one head's heat map and the word each word's head is
predicted to be by that head (paper §4.1: "whichever other word receives the most attention weight").

Everything is word-level, as in §4: ``[CLS] w_1 ... w_n [SEP]`` maps ``[layer, head, word, word]``
(split words merged as in :func:`helpers.word_level`; a decoder's are ``BOS w_1 ... w_n``, a word's
candidates then the words it sees). Heads are chosen and shown as 1-based ``"layer-head"``; word positions
in the table are 1-based (``[CLS]`` is 0). It needs no network (see :mod:`helpers.presentation.views`).

>>> import helpers
>>> lm = helpers.load_model()
>>> helpers.explore("The keys to the cabinet are on the table.", lm=lm)   # in a notebook  # doctest: +SKIP
>>> ex = analyse("The cat sat on the mat.", lm)                            # no widgets
>>> predicted_heads(ex.attn, ex.words, layer=0, head=0)                   # a DataFrame     # doctest: +SKIP
"""
from __future__ import annotations

import numbers
import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from helpers.core.encoding import MAX_LENGTH, check_words, encode_words, printable
from helpers.core.extract import attention_for
from helpers.core.labels import head_label
from helpers.presentation import views
from helpers.syntax.stats import DIRECTIONS, predict_heads, word_layout

# words and punctuation marks apart, apostrophes kept inside words ("isn't", "cat's")
WORD_PATTERN = re.compile(r"\w+(?:['’]\w+)*|[^\w\s]")


def split_words(text: str) -> list[str]:
    """Words of a typed sentence: runs of letters/digits (with inner apostrophes) and single punctuation marks."""
    return WORD_PATTERN.findall(text)


@dataclass(frozen=True)
class Exploration:
    """One sentence's word-level maps ``attn: [layer, head, word, word]`` over ``words`` ([CLS] ... [SEP]; a
    decoder's BOS ..., whose heads see only their prefix: ``causal``); ``n_words`` counts the words alone."""

    words: tuple[str, ...]
    attn: np.ndarray
    model: str
    n_words: int | None = None  # None: every position but [CLS] and [SEP]
    causal: bool = False


ECHO = 60  # characters of a user's text shown in an error message


def _words_of(text) -> list[str]:
    """The words of ``text`` (a string, or a list or tuple of strings), or a ``TypeError`` saying what is accepted."""
    if isinstance(text, str):
        return split_words(text)
    if isinstance(text, (list, tuple)) and all(isinstance(w, str) for w in text):
        if any(not w.strip() for w in text):
            raise ValueError("text: a list of words holds an empty word; give words with letters, digits or punctuation")
        return list(text)
    kind = type(text).__name__ if not isinstance(text, (list, tuple)) else f"a {type(text).__name__} holding non-strings"
    raise TypeError(f"text: give a sentence (str) or its words (a list of str), not {kind}")


def _check_lm(lm) -> None:
    if not (hasattr(lm, "tokenizer") and hasattr(lm, "model")):
        raise TypeError(f"lm: a model from helpers.load_model(), not {type(lm).__name__}")


def _check_max_length(max_length) -> None:
    if isinstance(max_length, bool) or not isinstance(max_length, numbers.Integral) or max_length < 3:
        raise ValueError(f"max_length={printable(repr(max_length), limit=ECHO)}: a whole number of tokens, at least 3")


def analyse(text: str | Sequence[str], lm, *, max_length: int = MAX_LENGTH) -> Exploration:
    """Word-level attention of ``text`` (a string, split by :func:`split_words`, or a list of words)."""
    words = _words_of(text)
    _check_lm(lm)
    _check_max_length(max_length)
    shown = printable(text if isinstance(text, str) else " ".join(text), limit=ECHO)
    if len(words) < 2:
        raise ValueError(f"text: {len(words)} word(s) found in {shown!r}; at least two are needed")
    batch = encode_words(lm.tokenizer, [words], max_length=max_length)
    if not batch.examples:
        raise ValueError(f"text: {shown!r} is longer than max_length={max_length} tokens; shorten it or raise max_length")
    limit = getattr(lm, "max_positions", None)
    if isinstance(limit, int) and len(batch.examples[0]) > limit:
        raise ValueError(f"text: {shown!r} is {len(batch.examples[0])} tokens long, more than the model's "
                         f"{limit} positions; shorten it")
    (attn,) = attention_for(lm, batch, level="word")
    return Exploration(words=tuple(lm.position_labels(batch.examples[0])), attn=np.asarray(attn),
                       model=getattr(lm, "label", lm.name), n_words=len(words), causal=bool(lm.causal))


def predicted_heads(attn: np.ndarray, words: Sequence[str], *, layer: int, head: int,
                    direction: str = DIRECTIONS[0], n_words: int | None = None, causal: bool = False):
    """For head ``(layer, head)`` (0-based), each word's predicted head as a table with 1-based positions.

    ``direction="dependent-to-head"``: the word a word attends to most; ``"head-to-dependent"``: the
    word that attends most to it ([CLS], [SEP] and the word itself never count; ties go to the
    earliest word, as in :func:`helpers.syntax.stats.predict_heads`). ``weight`` is that attention weight.
    A decoder's map (``BOS`` and the words, or the words alone: give ``n_words`` and ``causal`` as
    :func:`analyse`'s :class:`Exploration` holds them): a word's candidates are the words it sees, and a word with
    none predicts nothing (``predicted head`` 0, no head word).
    """
    import pandas as pd

    check_words(words)
    if not isinstance(direction, str) or direction not in DIRECTIONS:
        raise ValueError(f"direction={printable(repr(direction), limit=ECHO)}: choose one of {', '.join(DIRECTIONS)}")
    attn = np.asarray(attn)
    n = len(words) - 2 if n_words is None else n_words
    if (attn.ndim != 4 or attn.shape[-1] != attn.shape[-2] or attn.shape[-1] != len(words) or n < 1
            or not 0 <= len(words) - n <= 2):
        raise ValueError(f"attn {attn.shape} and {len(words)} words: attn must be [layer, head, word, word] over the "
                         "words, [CLS] and [SEP] included (as analyse gives them)")
    lead, _ = word_layout(len(words), n)
    _check_head(layer, head, attn.shape[0], attn.shape[1])
    d = DIRECTIONS.index(direction)
    one = attn[None, layer : layer + 1, head : head + 1]  # a batch of one map of one head
    preds = predict_heads(one, [len(words)], [n], causal=causal)[0, d, 0, 0].numpy()  # 1-based
    rows = []
    for i, p in enumerate(preds.tolist(), start=1):
        q, k = i - 1 + lead, p - 1 + lead  # positions in the map
        weight = (attn[layer, head, q, k] if d == 0 else attn[layer, head, k, q]) if p else 0.0
        rows.append({"position": i, "word": words[q], "predicted head": p, "head word": words[k] if p else "",
                     "weight": round(float(weight), 3)})
    return pd.DataFrame(rows)


def _check_head(layer, head, n_layers: int, n_heads: int) -> None:
    for name, value, size in (("layer", layer, n_layers), ("head", head, n_heads)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value < size:
            raise ValueError(f"layer={printable(repr(layer), limit=ECHO)}, head={printable(repr(head), limit=ECHO)}: "
                             f"0-based, within {n_layers} layers x {n_heads} heads (the label \"1-1\" is layer=0, head=0)")


def most_confident_head(attn: np.ndarray, *, n_words: int | None = None) -> tuple[int, int]:
    """0-based ``(layer, head)`` whose words attend most sharply to one other word
    (highest mean over words of the largest weight on another word, [CLS]/[SEP] or BOS excluded; ``n_words``
    as for :func:`predicted_heads`). Under a causal mask the first word sees no other word: it scores 0."""
    a = np.asarray(attn, dtype=np.float64)
    size = a.shape[-1]
    lead, trail = word_layout(size, size - 2 if n_words is None else n_words)
    a = a[..., lead : size - trail, lead : size - trail].copy()
    n = a.shape[-1]
    a[..., np.arange(n), np.arange(n)] = -np.inf
    score = np.where(np.isneginf(a.max(-1)), 0.0, a.max(-1)).mean(-1)
    layer, head = np.unravel_index(int(score.argmax()), score.shape)
    return int(layer), int(head)


class Explorer:
    """The panel :func:`explore` returns: a sentence box, head and direction pickers, the head view,
    the chosen head's heat map and the table of :func:`predicted_heads`. ``exploration`` and
    ``table`` hold the current data."""

    def __init__(self, text: str | Sequence[str], lm, *, layer: int | None, head: int | None,
                 direction: str, max_length: int):
        import ipywidgets as w

        self.lm, self.max_length = lm, max_length
        if (layer is None) != (head is None):
            raise ValueError("layer, head: give both (0-based) or neither")
        if not isinstance(direction, str) or direction not in DIRECTIONS:
            raise ValueError(f"direction={printable(repr(direction), limit=ECHO)}: choose one of {', '.join(DIRECTIONS)}")
        self.exploration = analyse(text, lm, max_length=max_length)
        n_layers, n_heads = self.exploration.attn.shape[:2]
        if layer is None:
            layer, head = most_confident_head(self.exploration.attn, n_words=self.exploration.n_words)
        _check_head(layer, head, n_layers, n_heads)
        layer, head = int(layer), int(head)
        self.sentence = w.Text(value=text if isinstance(text, str) else " ".join(text), description="sentence",
                               continuous_update=False, layout=w.Layout(width="95%"))
        self.head = w.Dropdown(options=[(head_label(l, h), (l, h)) for l in range(n_layers) for h in range(n_heads)],
                               value=(layer, head), description="head")
        self.direction = w.ToggleButtons(options=list(DIRECTIONS), value=direction, description="direction")
        self.message = w.HTML()
        self.libraries, self.view, self.map, self.predictions = (w.Output() for _ in range(4))
        self.libraries.append_display_data(_html(views.libraries_html(mode="always")))  # drawn first, once
        self.widget = w.VBox([
            self.libraries, self.sentence, w.HBox([self.head, self.direction]), self.message,
            w.HTML("<b>Head view</b> (word level; the chosen head is preselected)"), self.view,
            w.HBox([self.map, w.VBox([w.HTML("<b>Predicted head of each word</b>"), self.predictions])]),
        ])
        self.sentence.observe(self._new_sentence, names="value")
        self.head.observe(self._redraw, names="value")
        self.direction.observe(self._redraw, names="value")
        self._draw(view=True)

    @property
    def table(self):
        layer, head = self.head.value
        ex = self.exploration
        return predicted_heads(ex.attn, ex.words, layer=layer, head=head, direction=self.direction.value,
                               n_words=ex.n_words, causal=ex.causal)

    def _new_sentence(self, change) -> None:
        try:
            self.exploration = analyse(change["new"], self.lm, max_length=self.max_length)
        except ValueError as err:
            self.message.value = f'<span style="color:#a33">{err}</span>'
            return
        self.message.value = ""
        self._draw(view=True)

    def _redraw(self, change) -> None:
        self._draw(view=change["owner"] is self.head)

    def _draw(self, *, view: bool) -> None:
        ex = self.exploration
        layer, head = self.head.value
        with views.libraries_mode("never"):  # the panel's first output carries them
            if view:
                self.view.outputs = ()
                self.view.append_display_data(_html(views.head_view_html(ex.attn, ex.words, layer=layer, heads=[head])))
            self.map.outputs = ()
            self.map.append_display_data(views.head_heatmap(
                ex.attn[layer, head], ex.words, title=f"Head {head_label(layer, head)} of {ex.model}", size=260))
            self.predictions.outputs = ()
            self.predictions.append_display_data(self.table.style.hide(axis="index").format(precision=3))

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)


def _html(text: str):
    from IPython.display import HTML

    return HTML(text)


def explore(text: str | Sequence[str], *, lm=None, layer: int | None = None, head: int | None = None,
            direction: str = DIRECTIONS[0], max_length: int = MAX_LENGTH) -> Explorer:
    """An interactive panel for ``text`` with ``lm`` (default: :func:`helpers.load_model`'s offline model).

    ``layer``/``head`` (0-based) choose the starting head, by default :func:`most_confident_head`.
    Type another sentence in its box, pick a head or a direction: the views and table follow.
    """
    _words_of(text)  # a wrong argument is said before a model loads
    if lm is None:
        from helpers.core.models import load_model

        lm = load_model()
    return Explorer(text, lm, layer=layer, head=head, direction=direction, max_length=max_length)
