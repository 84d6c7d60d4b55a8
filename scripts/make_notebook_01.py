"""Writes notebooks/01_attention_maps.ipynb (kept as a script so the chapter's source diffs cleanly)."""
from pathlib import Path

import nbformat as nbf

md, code = nbf.v4.new_markdown_cell, nbf.v4.new_code_cell
cells = [
md("""# Attention maps, tokens and words

*Paper §2 (Background: Transformers and BERT) and §4.1 (Method: word-level attention).*

## Overview

Every later chapter reads attention maps, so this one shows what a map is and how we compute it:

1. the attention formula of §2, checked against the weights the model returns;
2. one sentence's maps as bertviz head and model views and as an interactive heat map;
3. the conversion of token-level maps into the word-level maps that §4 evaluates against treebanks,
   on a sentence with a word that the tokenizer splits.

All numbers below are computed when the book is built, for the model named in the next section."""),
code("""import numpy as np
import pandas as pd
from myst_nb import glue

import helpers
from helpers import views
from helpers.config import sized
from helpers.encoding import split_word_fraction
from helpers.examples import first_with_split_word
from helpers.extract import attention_for
from helpers.formula import recompute_attention
from helpers.labels import head_label
from helpers.paper import SPLIT_WORD_FRACTION
from helpers.wordlevel import conversion_matrices, word_level

lm = helpers.load_model()  # the offline default; pass a Hugging Face name to analyse another model
sentences = helpers.load_treebank("gum:dev", max_sentences=sized(2000, 200))""", metadata={"tags": ["hide-cell"]}),
md("""## The model

This build analyses **{glue:}`model_name`**, which has {glue:}`n_layers` layers of {glue:}`n_heads`
attention heads. The paper analysed BERT-base (12 layers of 12 heads). Heads are written as the
paper writes them, 1-based `layer-head`: head `1-1` is the first head of the first layer."""),
code("""glue("model_name", lm.label, display=False)
glue("n_layers", lm.n_layers, display=False)
glue("n_heads", lm.n_heads, display=False)"""),
md("""## Attention weights (§2)

> The head computes attention weights α between all pairs of words as softmax-normalized dot
> products between the query and key vectors. — Clark et al. (2019), §2

$$\\alpha_{ij} = \\frac{\\exp(q_i^\\top k_j / \\sqrt{d})}{\\sum_{l=1}^{n} \\exp(q_i^\\top k_l / \\sqrt{d})}$$

The paper's equation leaves out the $1/\\sqrt{d}$ scaling ($d$ is the head size) that BERT applies;
we write it in. Row $i$ of a map is the *attending* (query) token and column $j$ the *attended*
(key) token, so every row sums to 1. One example's maps are stored as an array
`[layer, head, query, key]`.

The example sentence is chosen by a rule: the first sentence of the GUM dev set with 6 to 12 words
in which the tokenizer splits some word into at least two tokens."""),
code("""index = first_with_split_word(sentences, lm.tokenizer, min_words=6, max_words=12)
sentence = sentences[index]
batch = helpers.encode_words(lm.tokenizer, [sentence.words])
example = batch.examples[0]
tokens = lm.tokenizer.convert_ids_to_tokens(example.input_ids.tolist())
(token_attn,) = attention_for(lm, batch, level="token")  # [layer, head, query, key]
print(sentence.sent_id, ":", " ".join(tokens))"""),
md("""As a check of the formula, we recompute $\\mathrm{softmax}(QK^\\top/\\sqrt{d})$ for every layer from
the hidden states entering it and the layer's query and key projections. The largest difference from
the weights the model returns is {glue:}`formula_max_diff`, i.e. the extracted maps are exactly
the weights the formula defines (up to float32 rounding)."""),
code("""recomputed = np.stack([recompute_attention(lm, example.input_ids, layer=l).numpy() for l in range(lm.n_layers)])
formula_max_diff = float(np.abs(recomputed - token_attn).max())
glue("formula_max_diff", f"{formula_max_diff:.1e}", display=False)"""),
md("""## Views of one sentence

### Head view

The head view draws, for one layer, a line from each attending token (left) to each attended token
(right), darker for larger weights; colours are heads. Click a token to see only its attention,
double-click a colour to isolate a head. It opens on the last layer."""),
code("""views.head_view(token_attn, tokens, layer=lm.n_layers - 1)"""),
md("""**Figure 1.1.** bertviz head view of the example sentence, last layer, every head. Many lines
run to `[SEP]` and `[CLS]`, the pattern Chapter 3 measures.

### Model view

The model view shows every head at once: rows are layers and columns heads, each thumbnail a
miniature of the head view."""),
code("""views.model_view(token_attn, tokens)"""),
md("""**Figure 1.2.** bertviz model view: all {glue:}`n_layers` × {glue:}`n_heads` heads on the
example sentence. Click a thumbnail to enlarge it. Several kinds of head are visible at a glance:
heads attending to the next or previous token (diagonal bands), to delimiters, or broadly.

### Heat map

The same maps as a matrix. Use the sliders to change layer and head; hover for exact weights. It
opens on the head with the most concentrated attention (the highest average maximum weight per row),
head {glue:}`focused_head`."""),
code("""layer, head = np.unravel_index(token_attn.max(-1).mean(-1).argmax(), token_attn.shape[:2])
glue("focused_head", head_label(layer, head), display=False)
views.heatmap(token_attn, tokens, layer=int(layer) + 1, head=int(head) + 1,
              title="Token-level attention of the example sentence")"""),
md("""**Figure 1.3.** Token-level attention weights of the example sentence; rows attend, columns are
attended to. The starting head puts most of each row's weight on one token.

## From tokens to words (§4.1)

> For attention to a split-up word, we sum up the attention weights over its tokens. For attention
> from a split-up word, we take the mean of the attention weights over its tokens. These
> transformations preserve the property that the attention from each word sums to 1.
> — Clark et al. (2019), §4.1

With a 0/1 matrix $S$ (token → word) and a row matrix $R$ ($R_{wt} = 1/|w|$ for each token $t$ of
word $w$), the word-level map of every head at once is $W = R\\,A\\,S$. `[CLS]` and `[SEP]` stay as
positions of their own, first and last. The table shows which word each token belongs to."""),
code("""words = ["[CLS]", *sentence.words, "[SEP]"]
pd.DataFrame({"token": tokens, "word position": example.word_of_token,
              "word": [words[w] for w in example.word_of_token]}).T"""),
code("""R, S = conversion_matrices(example.word_of_token, mode="mean")
word_attn = word_level(token_attn, example.word_of_token)          # [layer, head, word, word]
(extracted,) = attention_for(lm, batch, level="word")              # the batched extraction path
glue("word_path_diff", f"{float(np.abs(word_attn - extracted).max()):.1e}", display=False)
glue("row_sum_dev", f"{float(np.abs(word_attn.sum(-1) - 1).max()):.1e}", display=False)
views.heatmap(word_attn, words, layer=int(layer) + 1, head=int(head) + 1,
              title="Word-level attention of the example sentence")"""),
md("""**Figure 1.4.** Word-level attention of the same head: the split word's tokens became one row
(their mean) and one column (their sum). Rows still sum to 1: the largest deviation is
{glue:}`row_sum_dev`. The batched extraction path, which converts all heads of a batch with two
matrix products, agrees with this per-example computation to {glue:}`word_path_diff`.

### Mean or first token?

The paper says attention *from* a split word is the mean over its tokens, but the authors' released
code converted with its default `mode="first"`, keeping only the first token's row. We use the
mean, as the paper says, and offer `word_mode="first"` (CLI: `--word-mode first`) to follow the code.
For the split word of the example, the two rows of the starting head differ as follows:"""),
code("""split_word = int(np.bincount(example.word_of_token).argmax())  # the word with most tokens
first_attn = word_level(token_attn, example.word_of_token, mode="first")
pd.DataFrame({"mean (paper)": word_attn[layer, head, split_word], "first (released code)": first_attn[layer, head, split_word]},
             index=words).T.round(3)"""),
md("""## How often are words split?

> BERT uses byte-pair tokenization, which means some words (~8% in our data) are split up into
> multiple tokens. — Clark et al. (2019), §4.1

On the GUM dev sentences read here, this model's tokenizer splits {glue:}`split_pct` of the words
(paper: {glue:}`paper_split_pct` on WSJ with BERT's cased WordPiece vocabulary). GUM's genres
(conversation, vlogs, academic prose) are more varied than newswire."""),
code("""corpus_batch = helpers.encode_words(lm.tokenizer, [s.words for s in sentences])
split_fraction = split_word_fraction(corpus_batch)
glue("split_pct", f"{100 * split_fraction:.1f}%", display=False)
glue("paper_split_pct", f"{100 * SPLIT_WORD_FRACTION.value:.0f}%", display=False)
glue("n_sentences", len(corpus_batch.examples), display=False)"""),
md("""## Summary"""),
code("""pd.DataFrame(
    [("words split into several tokens", f"~{100 * SPLIT_WORD_FRACTION.value:.0f}% (WSJ)", f"{100 * split_fraction:.1f}% (GUM dev)", "different corpus and vocabulary"),
     ("word-level rows sum to 1", "yes", f"max deviation {float(np.abs(word_attn.sum(-1) - 1).max()):.1e}", "by construction"),
     ("maps equal softmax(QKᵀ/√d)", "formula in §2", f"max difference {formula_max_diff:.1e}", "scaling written in")],
    columns=["claim", "paper", "this model", "note"],
)"""),
md("""## Deviations from the paper

- **Model.** The offline default is all-MiniLM-L6-v2 (6 layers × 12 heads, uncased WordPiece), a
  distilled sentence-embedding model, not BERT-base. Any Hugging Face name can be passed instead.
- **Token types.** Every token-type id is 0, even for two-segment inputs, as in the attention maps
  the authors released (their extraction script passed all-zero segment ids).
- **Word conversion.** Mean over a split word's tokens (the paper), not the first token (the
  released code); `word_mode="first"` reproduces the code.
- **Data.** GUM (Universal Dependencies) instead of the Penn Treebank WSJ, which is licensed."""),
]
nb = nbf.v4.new_notebook(cells=cells, metadata={
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
})
out = Path(__file__).resolve().parents[1] / "notebooks" / "01_attention_maps.ipynb"
nbf.write(nb, out)
print(f"wrote {out}")
