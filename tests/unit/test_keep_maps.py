"""``keep_maps``: one setting (``$BERT_ATTENTION_KEEP_MAPS``, ``--keep-maps``) in the run's context; ``prune``
keeps its own ``--keep-maps`` (remove the spilled batches only)."""
from __future__ import annotations

from helpers.cli import build_parser
from helpers.config import KEEP_MAPS_ENV
from helpers.context import RunContext, in_force
from helpers.pipeline.options import context


def test_the_variable_is_read_into_the_context_and_an_argument_wins(monkeypatch):
    monkeypatch.delenv(KEEP_MAPS_ENV, raising=False)
    assert RunContext.from_env().keep_maps is False and in_force().keep_maps is False
    monkeypatch.setenv(KEEP_MAPS_ENV, "1")
    assert RunContext.from_env().keep_maps is True
    assert in_force().keep_maps is True  # outside any context: the environment's (the route's reading)
    assert RunContext.from_env(keep_maps=False).keep_maps is False
    with RunContext(keep_maps=False).active():
        assert in_force().keep_maps is False  # the context in force wins over the environment
    monkeypatch.setenv(KEEP_MAPS_ENV, "0")
    assert RunContext.from_env().keep_maps is False


def test_every_command_takes_keep_maps_and_prune_keeps_its_own(monkeypatch, tmp_path):
    monkeypatch.delenv(KEEP_MAPS_ENV, raising=False)
    parser = build_parser()
    args = parser.parse_args(["extract", "--keep-maps", "--cache-dir", str(tmp_path)])
    assert context(args).keep_maps is True
    args = parser.parse_args(["coref", "--cache-dir", str(tmp_path)])
    assert args.keep_maps is None and context(args).keep_maps is False  # unset: the environment's
    monkeypatch.setenv(KEEP_MAPS_ENV, "1")
    args = parser.parse_args(["probe", "--cache-dir", str(tmp_path)])
    assert context(args).keep_maps is True
    pruned = parser.parse_args(["prune", "--keep-maps", "--cache-dir", str(tmp_path)])
    assert pruned.keep_maps is True and pruned.dry_run is False
