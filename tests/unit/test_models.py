"""Model loading: local paths, random-init controls, clear errors offline."""
import pytest
import torch

from helpers.core.models import DEFAULT_MODEL, load_model
from helpers.core.errors import ModelNotAvailableError


def test_unknown_name_offline_names_the_default_and_local_paths():
    with pytest.raises(ModelNotAvailableError) as err:
        load_model("no-such-org/no-such-model")
    message = str(err.value)
    assert DEFAULT_MODEL in message and "--model /path/to/model" in message


def test_directory_without_config_is_explained(tmp_path):
    with pytest.raises(ModelNotAvailableError, match="no config.json"):
        load_model(str(tmp_path))


def test_random_init_is_seeded_and_differs_from_pretrained(tiny_model_dir, tiny_lm):
    a = load_model(str(tiny_model_dir), random_init=True, seed=1)
    b = load_model(str(tiny_model_dir), random_init=True, seed=1)
    c = load_model(str(tiny_model_dir), random_init=True, seed=2)
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()
    assert a.fingerprint() != tiny_lm.fingerprint()
    assert "random init, seed 1" in a.label
    assert a.model.config._attn_implementation == "eager" and not a.model.training


def test_fingerprint_tracks_weights(tiny_model_dir):
    lm = load_model(str(tiny_model_dir))
    before = lm.fingerprint()
    with torch.no_grad():
        next(lm.model.parameters()).add_(1.0)
    lm._fingerprint = None
    assert lm.fingerprint() != before


@pytest.mark.slow
def test_offline_default_model():
    lm = load_model()
    assert (lm.n_layers, lm.n_heads) == (6, 12)
    assert lm.name == DEFAULT_MODEL and lm.tokenizer.is_fast


def test_paper_control_keeps_word_and_position_embeddings_only(tiny_model_dir, tiny_lm):
    pre = tiny_lm.model.state_dict()
    paper = load_model(str(tiny_model_dir), random_init=True, seed=1)
    assert paper.random_init == "paper"
    assert load_model(str(tiny_model_dir), random_init="paper", seed=1).fingerprint() == paper.fingerprint()
    noise = load_model(str(tiny_model_dir), random_init="all", seed=1)
    assert "all weights" in noise.label and noise.fingerprint() != paper.fingerprint()
    kept = ("embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight")
    for name in kept:
        assert torch.equal(paper.model.state_dict()[name], pre[name])
        assert not torch.equal(noise.model.state_dict()[name], pre[name])
    # every other weight is that of the all-random model of the same seed, not the pre-trained one
    others = [n for n, t in paper.model.state_dict().items() if n not in kept and t.is_floating_point()]
    assert all(torch.equal(paper.model.state_dict()[n], noise.model.state_dict()[n]) for n in others)
    assert not torch.equal(paper.model.state_dict()["embeddings.token_type_embeddings.weight"],
                           pre["embeddings.token_type_embeddings.weight"])
    assert not torch.equal(paper.model.state_dict()["encoder.layer.0.attention.self.query.weight"],
                           pre["encoder.layer.0.attention.self.query.weight"])


def test_random_init_kind_is_checked(tiny_model_dir):
    with pytest.raises(ValueError, match="--random-init 'some'"):
        load_model(str(tiny_model_dir), random_init="some")


def test_cli_random_init_option():
    from helpers.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["info"]).random_init is False
    assert parser.parse_args(["info", "--random-init"]).random_init == "paper"
    assert parser.parse_args(["info", "--random-init", "all"]).random_init == "all"
