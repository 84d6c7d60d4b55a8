"""Tiny random decoders built from configs (no download): a GPT-2 and a Llama with grouped-query attention, each
with a byte-level BPE tokenizer trained here on a few sentences, saved with ``save_pretrained``; and the same
Llama written as a ``.gguf`` file with the ``gguf`` package, the way llama.cpp's converter writes one."""
from __future__ import annotations

from pathlib import Path

TEXT = ["the cat sat on the mat", "a dog sat", "the dog is big", "un aff able cats sit ."] * 20
SENTENCE = ["The", "unaffable", "cat", "sat", "on", "the", "mat", "."]
GPT2_LAYERS, GPT2_HEADS = 2, 4
LLAMA_LAYERS, LLAMA_HEADS, LLAMA_KV_HEADS = 2, 4, 2  # two query heads per key-value head
CONTEXT = 64  # positions of both models


def byte_level_bpe(special: list[str]):
    """A byte-level BPE (``tokenizers``) trained on :data:`TEXT`, its ByteLevel pre-tokenizer without a prefix
    space (as GPT-2's and Llama-3's ship)."""
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer(add_prefix_space=False)
    bpe.train_from_iterator(TEXT, vocab_size=300, min_frequency=1, special_tokens=special, show_progress=False)
    return bpe


def save_gpt2(directory: Path, *, seed: int = 0) -> Path:
    """A 2-layer, 4-head random GPT2LMHeadModel; its BOS (= EOS) is ``<|endoftext|>``, as GPT-2's."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    bpe = byte_level_bpe(["<|endoftext|>"])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<|endoftext|>",
                                        eos_token="<|endoftext|>", unk_token="<|endoftext|>")
    config = GPT2Config(vocab_size=bpe.get_vocab_size(), n_embd=16, n_layer=GPT2_LAYERS, n_head=GPT2_HEADS,
                        n_positions=CONTEXT, bos_token_id=0, eos_token_id=0)
    torch.manual_seed(seed)
    GPT2LMHeadModel(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def llama_config(vocab_size: int):
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=vocab_size, hidden_size=16, intermediate_size=32, num_hidden_layers=LLAMA_LAYERS,
                       num_attention_heads=LLAMA_HEADS, num_key_value_heads=LLAMA_KV_HEADS,
                       max_position_embeddings=CONTEXT, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False,
                       rms_norm_eps=1e-5)


def save_llama(directory: Path, *, seed: int = 0) -> Path:
    """A 2-layer Llama with 4 query heads sharing 2 key-value heads; BOS ``<s>`` (id 1), EOS ``</s>``."""
    import torch
    from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

    bpe = byte_level_bpe(["<unk>", "<s>", "</s>"])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<s>", eos_token="</s>",
                                        unk_token="<unk>")
    torch.manual_seed(seed)
    model = LlamaForCausalLM(llama_config(bpe.get_vocab_size()))
    with torch.no_grad():  # random norms, so that a wrong norm weight would show
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def _permute(weights, n_head: int):
    """llama.cpp's converter's reordering of the query and key rows (transformers reverses it on load)."""
    return weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:]).swapaxes(1, 2).reshape(weights.shape)


def write_llama_gguf(model_dir: Path, path: Path) -> Path:
    """The Llama of ``model_dir`` (:func:`save_llama`) as a float32 ``.gguf`` file: metadata, a gpt2-style
    tokenizer and tensors under llama.cpp's names."""
    import json

    import gguf
    import numpy as np
    from safetensors.numpy import load_file

    config = json.loads((model_dir / "config.json").read_text())
    weights = load_file(str(model_dir / "model.safetensors"))
    tok = json.loads((model_dir / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    specials = {a["content"] for a in tok["added_tokens"]}
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny-llama")
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(config["num_attention_heads"])
    writer.add_head_count_kv(config["num_key_value_heads"])
    writer.add_rope_dimension_count(config["hidden_size"] // config["num_attention_heads"])
    writer.add_rope_freq_base(float(config.get("rope_theta", 10000.0)))
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if t in specials else 1 for t in tokens])
    writer.add_token_merges(merges)
    writer.add_bos_token_id(vocab["<s>"])
    writer.add_eos_token_id(vocab["</s>"])
    writer.add_unk_token_id(vocab["<unk>"])
    heads, kv = config["num_attention_heads"], config["num_key_value_heads"]
    names = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}
    writer.add_tensor("token_embd.weight", weights["model.embed_tokens.weight"].astype(np.float32))
    for layer in range(config["num_hidden_layers"]):
        for hf, name in names.items():
            w = weights[f"model.layers.{layer}.{hf}.weight"].astype(np.float32)
            if hf == "self_attn.q_proj":
                w = _permute(w, heads)
            elif hf == "self_attn.k_proj":
                w = _permute(w, kv)
            writer.add_tensor(f"blk.{layer}.{name}.weight", np.ascontiguousarray(w))
    writer.add_tensor("output_norm.weight", weights["model.norm.weight"].astype(np.float32))
    writer.add_tensor("output.weight", weights["lm_head.weight"].astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
