"""The device models are loaded on: ``--device`` or ``$BERT_ATTENTION_DEVICE`` (a GPU build of the whole book).

No GPU is needed: CUDA's availability is patched where a test needs it absent or present.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from helpers.cli import main
from helpers.config import DEVICE_ENV, check_device, requested_device
from helpers.context import RunContext


@pytest.fixture
def no_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def test_check_device_accepts_the_cpu_and_names_what_is_wrong(no_cuda):
    assert check_device("cpu") == "cpu"
    with pytest.raises(ValueError, match="is not a torch device"):
        check_device("tpu9")
    with pytest.raises(ValueError, match="not supported"):
        check_device("meta")
    with pytest.raises(ValueError, match="CUDA is not available.*use --device cpu"):
        check_device("cuda")


def test_cuda_is_accepted_where_it_exists(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert check_device("cuda") == "cuda"
    assert check_device("cuda:1") == "cuda:1"
    with pytest.raises(ValueError, match="2 CUDA device"):
        check_device("cuda:2")


def test_the_variable_is_read_checked_and_loses_to_an_argument(monkeypatch, no_cuda):
    monkeypatch.delenv(DEVICE_ENV, raising=False)
    assert requested_device() is None  # unset: the CPU
    monkeypatch.setenv(DEVICE_ENV, " cpu ")
    assert requested_device() == "cpu"
    monkeypatch.setenv(DEVICE_ENV, "cuda")
    with pytest.raises(ValueError) as err:
        requested_device()
    assert f"${DEVICE_ENV}" in str(err.value) and "CUDA is not available" in str(err.value)
    assert f"{DEVICE_ENV}=cpu" in str(err.value)  # what to write instead
    assert requested_device("cpu") == "cpu"  # an argument (a command's --device) wins: the variable is not read


def test_run_context_takes_the_device_from_the_environment(monkeypatch, no_cuda):
    monkeypatch.setenv(DEVICE_ENV, "cpu")
    assert RunContext.from_env().device == "cpu"
    monkeypatch.delenv(DEVICE_ENV)
    assert RunContext.from_env().device is None
    monkeypatch.setenv(DEVICE_ENV, "cuda")
    with pytest.raises(ValueError, match=DEVICE_ENV):
        RunContext.from_env()


def test_load_model_refuses_a_bad_variable_before_loading(monkeypatch, no_cuda):
    import helpers.core.models as models

    def refuse(*args, **kwargs):
        raise AssertionError("the model was read before the device was checked")

    monkeypatch.setattr(models, "resolve_source", refuse)
    monkeypatch.setenv(DEVICE_ENV, "cuda")
    with pytest.raises(ValueError, match=f"\\${DEVICE_ENV}: 'cuda': CUDA is not available"):
        models.load_model()


def test_load_model_puts_the_model_on_the_variables_device(monkeypatch):
    from helpers.core.models import load_model

    monkeypatch.setenv(DEVICE_ENV, "cpu")
    lm = load_model()
    assert lm.device.type == "cpu"


def test_command_line_error_names_the_variable_and_device_wins(tmp_path, capsys, monkeypatch, no_cuda):
    monkeypatch.setenv(DEVICE_ENV, "cuda")
    assert main(["info", "--cache-dir", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert f"${DEVICE_ENV}" in err and "CUDA is not available" in err
    assert main(["info", "--cache-dir", str(tmp_path / "c"), "--device", "cpu"]) == 0  # --device wins


def test_gpu_measurements_are_recorded_beside_the_cpu_ones(monkeypatch):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    try:
        import common
    finally:
        sys.path.pop(0)
    import helpers.config as devices

    monkeypatch.delenv(DEVICE_ENV, raising=False)
    assert common.device_record("book_build") == "book_build"
    monkeypatch.setenv(DEVICE_ENV, "cpu")
    assert common.device_record("book_build") == "book_build"
    monkeypatch.setattr(devices, "requested_device", lambda device=None: "cuda:0")
    assert common.device_record("book_floor") == "book_floor_cuda"
