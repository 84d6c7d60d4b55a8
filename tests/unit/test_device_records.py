"""The recorded claims on a device (benchmarks/claims_device.py): the Performance page's table keeps the latest
recording of each device and kind of run, and the comparison with a CPU run names every verdict and value that
moved. Constructed record files; nothing runs."""
import importlib.util
import json
from pathlib import Path

from helpers.presentation import performance

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("claims_device", ROOT / "benchmarks" / "claims_device.py")
claims_device = importlib.util.module_from_spec(spec)
spec.loader.exec_module(claims_device)


def record(folder: Path, name: str, *, device: str, date: str, time: str = "12:00:00", model: str = "all-MiniLM-L6-v2",
           random_init=None, full_sizes=True, wall_s=100.0, equal=True) -> None:
    (folder / f"claims_device-{name}.json").write_text(json.dumps({
        "device": device, "model": model, "random_init": random_init, "layers": 6, "heads": 12,
        "full_sizes": full_sizes, "sizes": {} if full_sizes else {"segments": 40}, "wall_s": wall_s,
        "sections_s": {"load": 1.5, "surface": 20.0, "probe": 50.0}, "cpu_s": 300.0, "gpu_memory_peak_mib": 3000.0,
        "gpu_utilisation": [[0.0, 5.0, 3000.0]], "gpu_utilisation_mean": 5.0, "commit": "abc1234",
        "verdicts_equal_cpu": equal, "recorded": {"date": date, "time": time}}))


def test_the_table_keeps_the_latest_recording_of_each_device_and_run(tmp_path):
    record(tmp_path, "h100-old", device="NVIDIA H100", date="2026-11-27", wall_s=269.0)
    record(tmp_path, "h100-new", device="NVIDIA H100", date="2026-11-28", time="01:00:00", wall_s=55.0, equal=None)
    record(tmp_path, "h100-same-day-earlier", device="NVIDIA H100", date="2026-11-28", time="00:30:00", wall_s=70.0)
    record(tmp_path, "h100-llama", device="NVIDIA H100", date="2026-11-20", model="/x/llama-1b", random_init="all",
           full_sizes=False, wall_s=169.0)
    record(tmp_path, "cpu", device="Intel(R) Xeon(R) Processor", date="2026-11-27", full_sizes=False, wall_s=300.0,
           equal=False)
    (tmp_path / "claims_device-broken.json").write_text("{not json")
    (tmp_path / "book_build-default-2026-11-27.json").write_text(json.dumps({"device": "other"}))

    frame = performance.device_table(tmp_path)
    assert len(frame) == 3
    h100 = frame.loc[("NVIDIA H100", "all-MiniLM-L6-v2")]
    assert h100["wall (s)"] == 55.0 and h100["verdicts vs CPU"] == "not compared" and h100["sizes"] == "the book's"
    llama = frame.loc[("NVIDIA H100", "llama-1b, random init (all)")]
    assert llama["wall (s)"] == 169.0 and llama["sizes"] == "reduced: segments 40"
    cpu = frame.loc[("Intel(R) Xeon(R) Processor", "all-MiniLM-L6-v2")]
    assert cpu["verdicts vs CPU"] == "DIFFER" and cpu["probe (s)"] == 50.0 and cpu["segment pass (s)"] is None


def test_the_table_says_so_when_nothing_is_recorded(tmp_path):
    frame = performance.device_table(tmp_path)
    assert frame.columns.tolist() == ["measurement"] and "no device recording yet" in frame.iloc[0, 0]


def claims(*rows):
    return {"model": "m", "claims": [{"id": i, "verdict": v, "value": x} for i, v, x in rows]}


def test_the_comparison_with_a_cpu_run_names_each_value_that_moved():
    cpu = claims(("a", "reproduced", 1.0), ("b", "partly", 0.5), ("c", "not reproduced", None))
    equal, moved = claims_device.compare_claims(claims(("a", "reproduced", 1.0), ("b", "partly", 0.5000001),
                                                       ("c", "not reproduced", None)), cpu)
    assert equal is True and set(moved) == {"b"}
    assert moved["b"]["cpu"] == 0.5 and abs(moved["b"]["relative"] - 2e-7) < 1e-12
    equal, moved = claims_device.compare_claims(claims(("a", "partly", 1.0), ("b", "partly", 0.5),
                                                       ("c", "not reproduced", None)), cpu)
    assert equal is False and moved == {}
    equal, _ = claims_device.compare_claims(claims(("a", "reproduced", 1.0)), cpu)  # a claim missing: not equal
    assert equal is False


def test_the_llama_config_has_the_1b_shape_and_its_parameter_count_is_transformers_own(tmp_path):
    """benchmarks/llama_config.py: the shape asked for, SmolLM2's other settings and tokenizer files, no weights; its
    parameter count against a tiny Llama that transformers builds from the same kind of config."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    spec = importlib.util.spec_from_file_location("llama_config", ROOT / "benchmarks" / "llama_config.py")
    llama_config = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(llama_config)
    source = tmp_path / "smol"
    source.mkdir()
    (source / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"],
                                                    "vocab_size": 49152, "bos_token_id": 1, "tie_word_embeddings": True,
                                                    "_model_name_or_path": "x", "num_hidden_layers": 30}))
    (source / "tokenizer.json").write_text("{}")
    config = llama_config.write(tmp_path / "out", source)
    assert {k: config[k] for k in llama_config.SHAPE} == llama_config.SHAPE and config["bos_token_id"] == 1
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["config.json", "tokenizer.json"]
    assert 1.0e9 < llama_config.parameters(config) < 1.1e9

    tiny = {"vocab_size": 50, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2, "intermediate_size": 24, "head_dim": 4, "tie_word_embeddings": True}
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**tiny))
    assert llama_config.parameters(tiny) == sum(p.numel() for p in model.parameters())
