"""Importing a Hugging Face config.json (from a local path only), a folder holding one, or a model
YAML written in pddplan's architecture schema; and the one-line errors for broken configs."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from pddplan.errors import InputError
from pddplan.inputs import load_model
from pddplan.inputs.hf_import import architecture_from_hf_config
from pddplan.perf.arithmetic import param_counts
from pddplan.perf.kv import kv_bytes_per_token
from pddplan.support.catalog import catalog_dir
from pddplan.support.loading import read_data

CATALOG = catalog_dir("model_catalog")
LLAMA_8B_TOTAL = 8_030_261_248


def config(name: str) -> dict[str, Any]:
    return copy.deepcopy(read_data(CATALOG / f"{name}.json"))


def write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data))
    return path


def import_error(data: dict[str, Any], source: str = "cfg.json") -> str:
    with pytest.raises(InputError) as info:
        architecture_from_hf_config(data, name="m", source=source)
    text = str(info.value)
    assert "\n" not in text
    return text


# -- importing from local files ------------------------------------------------------------------
def test_import_config_file(tmp_path: Path) -> None:
    path = write_json(tmp_path / "my-llama.json", config("llama-3.1-8b"))
    model = load_model(str(path))
    assert model.name == "my-llama"
    assert model.source == str(path)
    assert (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim) == (
        32,
        4096,
        32,
        8,
        128,
    )
    assert model.intermediate_size == 14336
    assert model.vocab_size == 128256
    assert model.moe is None and model.mla is None
    assert model.layer_kinds == ("full",) * 32
    assert model.kv_dtype == "bf16"
    assert param_counts(model).total == LLAMA_8B_TOTAL
    assert kv_bytes_per_token(model) == 131_072


def test_import_config_with_kv_dtype(tmp_path: Path) -> None:
    path = write_json(tmp_path / "m.json", config("llama-3.1-8b"))
    assert kv_bytes_per_token(load_model(str(path), "fp8")) == 65_536


def test_import_directory_with_config_json(tmp_path: Path) -> None:
    folder = tmp_path / "Llama-8B-local"
    folder.mkdir()
    write_json(folder / "config.json", config("llama-3.1-8b"))
    model = load_model(str(folder))
    assert model.name == "Llama-8B-local"
    assert model.source == str(folder / "config.json")
    assert param_counts(model).total == LLAMA_8B_TOTAL
    # the config.json path itself names the model after its folder too
    assert load_model(str(folder / "config.json")).name == "Llama-8B-local"


def test_directory_without_config_json(tmp_path: Path) -> None:
    """The folder exists: the message must say what is missing in it (its config.json)."""
    with pytest.raises(InputError) as info:
        load_model(str(tmp_path))
    msg = str(info.value)
    assert msg.startswith(str(tmp_path)), msg
    assert "config.json" in msg, msg


def test_missing_config_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.json"
    with pytest.raises(InputError) as info:
        load_model(str(path))
    assert str(info.value) == f"{path}: file not found"


def test_config_that_is_not_an_object(tmp_path: Path) -> None:
    path = write_json(tmp_path / "arr.json", [1, 2])
    with pytest.raises(InputError) as info:
        load_model(str(path))
    assert str(info.value) == f"{path}: expected a JSON object (a Hugging Face config.json)"


def test_model_yaml_in_the_schema(tmp_path: Path) -> None:
    data = {
        "name": "tiny-hybrid",
        "source": "user: test",
        "num_layers": 4,
        "hidden_size": 512,
        "vocab_size": 1000,
        "num_heads": 8,
        "num_kv_heads": 2,
        "head_dim": 64,
        "intermediate_size": 1024,
        "layer_kinds": ["sliding", "full", "sliding", "full"],
        "sliding_window": 256,
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(data))
    model = load_model(str(path))
    assert model.name == "tiny-hybrid"
    assert model.layer_kinds == ("sliding", "full", "sliding", "full")
    assert kv_bytes_per_token(model) == 2 * 2 * 2 * 64 * 2  # 2 full layers x K,V x 2 heads x 64 x bf16
    assert kv_bytes_per_token(load_model(str(path), "fp8")) == 2 * 2 * 2 * 64 * 1
    # d*h*k + 2*d*g*k + h*k*d + 3*d*f, 2 norms per layer + final, untied embeddings
    per_layer = 512 * 512 + 2 * 512 * 128 + 512 * 512 + 3 * 512 * 1024 + 2 * 512
    assert param_counts(model).total == 4 * per_layer + 512 + 2 * 1000 * 512


def test_shipped_model_yaml_loads_by_path(tmp_path: Path) -> None:
    """The catalog's YAML models omit `layer_kinds` (allowed: every layer is then full attention);
    loaded by path, as the CLI help promises for a model YAML, they must give the catalog's numbers."""
    for name in ("minimax-m2", "llama-3.1-405b"):
        path = tmp_path / f"{name}.yaml"
        path.write_text((CATALOG / f"{name}.yaml").read_text())
        by_path = load_model(str(path))
        by_name = load_model(name)
        assert param_counts(by_path).total == param_counts(by_name).total
        assert kv_bytes_per_token(by_path) == kv_bytes_per_token(by_name)


def test_invalid_model_yaml(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "name: x\nsource: s\nnum_layers: 2\nhidden_size: 64\nvocab_size: 10\nnum_heads: 4\nnum_kv_heads: 4\n"
        "head_dim: 16\nintermediate_size: 128\nlayer_kinds: [full, linear]\n"
    )
    with pytest.raises(InputError) as info:
        load_model(str(path))
    assert str(info.value) == (f"{path}: top level: linear layers need the `linear` block")


# -- family detection ----------------------------------------------------------------------------
def test_mla_config() -> None:
    model = architecture_from_hf_config(config("deepseek-v3"), name="ds", source="s")
    assert model.mla is not None
    assert (model.mla.kv_lora_rank, model.mla.qk_rope_head_dim, model.mla.qk_nope_head_dim, model.mla.v_head_dim) == (
        512,
        64,
        128,
        128,
    )
    assert model.mla.q_lora_rank == 1536
    assert model.head_dim == 192 and model.num_kv_heads == 128
    assert model.indexer is None
    assert model.moe is not None
    assert (model.moe.num_experts, model.moe.experts_per_token, model.moe.first_dense_layers) == (256, 8, 3)
    assert (model.moe.num_shared_experts, model.moe.shared_expert_intermediate_size) == (1, 2048)
    assert model.moe.router_bias  # noaux_tc
    assert model.intermediate_size == 18432
    # quant_method fp8 with weight_block_size [128, 128]: block-scaled FP8 (an fp32 scale per block)
    assert (model.weight_dtype, model.expert_dtype) == ("fp8-block", "fp8-block")


def test_dsa_indexer_config() -> None:
    model = architecture_from_hf_config(config("deepseek-v3.2"), name="ds", source="s", kv_dtype="fp8")
    assert model.indexer is not None
    assert (model.indexer.num_heads, model.indexer.head_dim, model.indexer.top_k) == (64, 128, 2048)
    assert kv_bytes_per_token(model) == 61 * (512 + 16 + 128 + 128 + 4)


def test_sliding_window_config() -> None:
    model = architecture_from_hf_config(config("gpt-oss-120b"), name="g", source="s")
    assert model.layer_kinds == ("sliding", "full") * 18
    assert model.sliding_window == 128
    assert model.attention_bias
    assert model.moe is not None and model.moe.expert_bias and model.moe.router_bias
    assert model.intermediate_size == 0  # every layer is MoE; 2880 is the expert width
    assert model.moe.expert_intermediate_size == 2880
    # quant_method mxfp4 converts the experts only (attention, router, embeddings stay bf16); the
    # format is OCP MXFP4 (an e8m0 scale per 32 values), not NVFP4, which `fp4` names
    assert (model.weight_dtype, model.expert_dtype) == ("bf16", "mxfp4")


def test_hybrid_linear_config() -> None:
    model = architecture_from_hf_config(config("qwen3-next-80b-a3b"), name="q", source="s")
    assert model.layer_kinds == ("linear", "linear", "linear", "full") * 12
    assert model.linear is not None
    lin = model.linear
    assert (lin.num_key_heads, lin.num_value_heads, lin.key_head_dim, lin.value_head_dim, lin.conv_kernel) == (
        16,
        32,
        128,
        128,
        4,
    )
    assert model.attention_output_gate and model.qk_norm
    assert model.moe is not None and model.moe.shared_expert_gate
    assert model.moe.shared_expert_intermediate_size == 512 and model.moe.num_shared_experts == 1


def test_layer_types_list_is_read() -> None:
    data = config("llama-3.1-8b")
    data["layer_types"] = ["linear_attention" if i % 2 else "full_attention" for i in range(32)]
    data.update(
        linear_num_key_heads=4,
        linear_num_value_heads=8,
        linear_key_head_dim=64,
        linear_value_head_dim=64,
    )
    model = architecture_from_hf_config(data, name="m", source="s")
    assert model.count("full") == 16 and model.count("linear") == 16
    assert model.linear is not None and model.linear.conv_kernel == 4  # the default


def test_text_config_is_used() -> None:
    """Multimodal configs nest the language model under text_config."""
    data = {"architectures": ["X"], "text_config": config("llama-3.1-8b"), "vision_config": {"hidden_size": 1}}
    model = architecture_from_hf_config(data, name="m", source="s")
    assert param_counts(model).total == LLAMA_8B_TOTAL


def test_alternative_key_names() -> None:
    data = {"n_layer": 2, "d_model": 64, "n_head": 4, "vocab_size": 100, "ffn_hidden_size": 256}
    model = architecture_from_hf_config(data, name="m", source="s")
    assert (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim) == (
        2,
        64,
        4,
        4,
        16,
    )
    assert model.intermediate_size == 256
    assert model.attention_kind == "mha"


def test_whole_number_floats_are_accepted() -> None:
    data = config("llama-3.1-8b")
    data["num_attention_heads"] = 32.0
    assert architecture_from_hf_config(data, name="m", source="s").num_heads == 32


# -- errors --------------------------------------------------------------------------------------
def test_missing_hidden_size() -> None:
    data = config("llama-3.1-8b")
    del data["hidden_size"]
    assert import_error(data) == "cfg.json: hidden_size: required field is missing (needed to size the model)"


def test_missing_vocab_size() -> None:
    data = config("llama-3.1-8b")
    del data["vocab_size"]
    assert import_error(data) == "cfg.json: vocab_size: required field is missing (needed to size the model)"


def test_unknown_layer_type() -> None:
    data = config("gpt-oss-120b")
    data["layer_types"][3] = "mamba"
    assert import_error(data) == "cfg.json: layer_types[3] = 'mamba': unknown layer type"


def test_layer_types_of_the_wrong_length() -> None:
    data = config("gpt-oss-120b")
    data["layer_types"] = data["layer_types"][:30]
    assert import_error(data) == "cfg.json: layer_types has 30 entries, num_hidden_layers is 36"


@pytest.mark.parametrize(("value", "shown"), [(32.5, "32.5"), ("32", "'32'"), (True, "True")])
def test_non_integer_head_count(value: Any, shown: str) -> None:
    data = config("llama-3.1-8b")
    data["num_attention_heads"] = value
    assert import_error(data) == f"cfg.json: num_attention_heads = {shown}: expected a whole number"


def test_sliding_layers_need_a_window() -> None:
    data = config("gpt-oss-120b")
    del data["sliding_window"]
    assert import_error(data) == "cfg.json: sliding_window: required field is missing (needed to size the model)"


def test_unsupported_moe_layouts() -> None:
    data = config("qwen3-235b-a22b")
    data["decoder_sparse_step"] = 2
    assert import_error(data) == "cfg.json: decoder_sparse_step/moe_layer_freq != 1 is not supported"
    data = config("qwen3-235b-a22b")
    data["mlp_only_layers"] = [5, 9]
    assert import_error(data) == "cfg.json: mlp_only_layers = [5, 9]: only leading dense layers are supported"


def test_leading_mlp_only_layers_become_dense_layers() -> None:
    data = config("qwen3-235b-a22b")
    data["mlp_only_layers"] = [0, 1]
    model = architecture_from_hf_config(data, name="m", source="s")
    assert model.moe is not None and model.moe.first_dense_layers == 2
    assert model.intermediate_size == 12288


def test_lightning_attention_is_refused() -> None:
    data = config("llama-3.1-8b")
    data["attn_type_list"] = [0, 1] * 16
    assert import_error(data) == "cfg.json: attn_type_list has non-softmax layers; lightning attention is not modelled"


def test_errors_reach_the_cli_as_one_line(tmp_path: Path, cli: Any) -> None:
    data = config("llama-3.1-8b")
    del data["hidden_size"]
    path = write_json(tmp_path / "config.json", data)
    result = cli("models", "show", str(path))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == f"error: {path}: hidden_size: required field is missing (needed to size the model)\n"


@pytest.mark.parametrize(
    ("changes", "names"),
    [
        ({"num_key_value_heads": 3}, ("num_key_value_heads", "num_kv_heads")),  # 32 heads not a multiple of 3
        ({"num_hidden_layers": -2}, ("num_hidden_layers", "num_layers")),
        ({"num_attention_heads": 0}, ("num_attention_heads", "num_heads")),
    ],
)
def test_inconsistent_config_is_a_one_line_input_error(
    tmp_path: Path, cli: Any, changes: dict[str, Any], names: tuple[str, ...]
) -> None:
    """A config whose numbers are whole but impossible must still end as one `error:` line with
    exit code 2 naming the field, not a traceback."""
    data = {**config("llama-3.1-8b"), **changes}
    path = write_json(tmp_path / "config.json", data)
    with pytest.raises(InputError) as info:
        load_model(str(path))
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith(f"{path}: ")
    assert any(name in text for name in names), text
    result = cli("models", "show", str(path))
    assert result.exit_code == 2
    assert result.stderr == f"error: {text}\n"
