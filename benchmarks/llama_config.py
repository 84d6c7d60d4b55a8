"""Write a config-only model folder of a 1B-parameter Llama shape with SmolLM2's tokenizer, for timing the analysis
of a model of that size with random weights (``claims --model DIR --random-init all``): 16 layers x 32 heads,
8 key-value heads (grouped-query attention), hidden size 2,048, MLP 8,192 (Llama 3.2 1B's shape), SmolLM2's
vocabulary (49,152 tokens, tied embeddings): about 1.07 billion parameters. No weights are written.

    python benchmarks/llama_config.py OUT [--tokenizer DIR]     # DIR: default, the installed smollm2 extra

The other settings (activation, norms, rotary positions, special token ids) are SmolLM2's, read from DIR's
``config.json``; the tokenizer files are copied from DIR.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

SHAPE = {"num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 2048,
         "intermediate_size": 8192, "head_dim": 64}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt",
                   "chat_template.jinja")


def parameters(config: dict) -> int:
    """The parameters of a Llama of ``config`` (tied embeddings counted once)."""
    h, layers, inter, vocab = config["hidden_size"], config["num_hidden_layers"], config["intermediate_size"], config["vocab_size"]
    head_dim = config.get("head_dim") or h // config["num_attention_heads"]
    attention = h * config["num_attention_heads"] * head_dim * 2 + h * config["num_key_value_heads"] * head_dim * 2
    per_layer = attention + 3 * h * inter + 2 * h
    return vocab * h * (1 if config.get("tie_word_embeddings", True) else 2) + layers * per_layer + h


def write(out: Path, tokenizer: Path) -> dict:
    config = json.loads((tokenizer / "config.json").read_text())
    if config.get("model_type") != "llama":
        raise SystemExit(f"--tokenizer {tokenizer}: a Llama folder (SmolLM2's) is needed, not {config.get('model_type')!r}")
    config = {k: v for k, v in config.items() if not k.startswith("_")}
    config.update(SHAPE, dtype="float32", use_cache=False)
    out.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        if (tokenizer / name).is_file():
            shutil.copy(tokenizer / name, out / name)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--tokenizer", type=Path, default=None, help="SmolLM2's folder (default: the installed extra)")
    args = parser.parse_args()
    tokenizer = args.tokenizer
    if tokenizer is None:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from helpers.core.model_extras import extra_dir

        tokenizer = extra_dir("smollm2")
    config = write(args.out, tokenizer)
    print(f"wrote {args.out}: Llama {config['num_hidden_layers']} x {config['num_attention_heads']} heads "
          f"({config['num_key_value_heads']} key-value), hidden {config['hidden_size']}, "
          f"{parameters(config) / 1e9:.2f} B parameters, no weights")


if __name__ == "__main__":
    main()
