"""Each cache is stored in the dtype its declaration names (issue 12 item 8).

A cache entry's ``dtype:`` rule: ``kv`` (default: the deployment's kv dtype — attention K/V
and latent caches), ``act`` (the activation dtype — conv states), or a fixed dtype, with an
optional ``scale: {dtype, per}``.  The deployment-free KV views take the row's ``dtype`` as
the kv dtype (and the act dtype); the per-device views resolve it from the deployment.

Expected values come from the config.json snapshots (archsql/specs/configs), with:
- DeepSeek-V3.2's index keys: FP8 + one FP32 scale per 128 elements (DeepSeek-V3.2-Exp
  inference/model.py ``Indexer``: ``k_cache`` float8_e4m3fn ``[.., index_head_dim]`` and
  ``k_scale_cache`` float32 ``[.., index_head_dim // block_size]``, block_size 128);
- recurrent / SSM states in FP32 (SGLang ``ServerArgs.mamba_ssm_dtype`` = "float32"; Qwen3.5's
  config ``mamba_ssm_dtype``), conv states in the activation dtype (vLLM
  ``MambaStateDtypeCalculator``: the conv state follows ``mamba_cache_dtype``, i.e. the model
  dtype by default).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from archsql.errors import ArchsqlError
from archsql.evaluator import evaluate
from archsql.specs import COMPONENTS_DIR, MODELS_DIR, load_library

CONFIGS = Path(__file__).parents[1] / "archsql" / "specs" / "configs"
BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "fp4": 0.5}  # archsql/defaults/dtypes.csv
MODELS = ("DeepSeek-V3", "DeepSeek-V3.2", "Meta-Llama-3.1-8B", "mamba-2.8b")


def _cfg(name: str) -> dict:
    return json.loads((CONFIGS / name).read_text())


@pytest.fixture(scope="module")
def con(store_of, tmp_path_factory):
    db = tmp_path_factory.mktemp("cache_dtypes") / "store.duckdb"
    shutil.copy(store_of(*MODELS), db)
    con = duckdb.connect(str(db))
    yield con
    con.close()


@pytest.mark.parametrize("kv_dtype", ["bf16", "fp8", "fp32"])
def test_dsa_index_key_is_fp8_with_a_scale_whatever_the_kv_dtype(con, kv_dtype):
    """Per token and layer: index_head_dim 128 FP8 values (1 B) + 128 / 128 = 1 FP32 scale
    (4 B) = 132 B, in every kv dtype; the latent (512) and rope key (64) follow the kv dtype."""
    cfg = _cfg("deepseek-ai__DeepSeek-V3.2.json")
    di = cfg["index_head_dim"]
    index_key = di * 1 + (di // 128) * 4
    assert index_key == 132
    rows = con.execute(
        "select kind, storage_dtype, bytes_per_token / layers from kv_per_token_by_kind "
        "where model = 'DeepSeek-V3.2' and dtype = ? and template = 'moe' order by kind",
        [kv_dtype],
    ).fetchall()
    assert rows == [
        ("index_key", "fp8+fp32/128", index_key),
        ("latent", kv_dtype, cfg["kv_lora_rank"] * BYTES[kv_dtype]),
        ("rope_key", kv_dtype, cfg["qk_rope_head_dim"] * BYTES[kv_dtype]),
    ]
    total = con.execute(
        "select bytes_per_token from kv_per_token where model = 'DeepSeek-V3.2' and dtype = ?", [kv_dtype]
    ).fetchone()[0]
    per_layer = (cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"]) * BYTES[kv_dtype] + index_key
    assert total == cfg["num_hidden_layers"] * per_layer  # bf16: 61 × 1,284 = 78,324


def test_kv_by_layer_group_shows_the_storage_dtype(con):
    """kv_by_layer_group at decode_b64_c32k, kv dtype fp8: the index keys of the 58 MoE layers
    of 64 requests at 32,768 positions take 64 · 32768 · 58 · 132 B."""
    row = con.execute(
        "select storage_dtype, layers, bytes from kv_by_layer_group where model = 'DeepSeek-V3.2' "
        "and workload = 'decode_b64_c32k' and dtype = 'fp8' and template = 'moe' and kind = 'index_key'"
    ).fetchone()
    assert row == ("fp8+fp32/128", 58, 64 * 32768 * 58 * 132)


def test_mamba_ssm_state_is_fp32_and_conv_state_act(con):
    """mamba-2.8b (Mamba1): d_inner = expand · hidden = 2 · 2560 = 5120; per layer and request
    the conv state holds d_inner · (conv_kernel − 1) = 15,360 elements (act dtype), the SSM
    state d_inner · state_size = 81,920 (FP32): in the bf16 row 64 layers × (15,360 · 2 +
    81,920 · 4) = 22,937,600 B per request."""
    cfg = _cfg("ArthurZ__mamba-2.8b.json")
    d_inner = cfg["expand"] * cfg["hidden_size"]
    conv, ssm = d_inner * (cfg["conv_kernel"] - 1), d_inner * cfg["state_size"]
    layers = cfg["num_hidden_layers"]
    rows = dict(
        (kind, (dtype, b))
        for kind, dtype, b in con.execute(
            "select kind, storage_dtype, state_bytes_per_request from kv_per_token_by_kind "
            "where model = 'mamba-2.8b' and dtype = 'bf16'"
        ).fetchall()
    )
    assert rows == {"conv_state": ("bf16", layers * conv * 2), "ssm_state": ("fp32", layers * ssm * 4)}
    assert layers * (conv * 2 + ssm * 4) == 22_937_600
    # the per-device view takes the act dtype from the deployment (1xH200-single: act bf16)
    act = con.execute("select act_dtype, kv_dtype from deployments where deployment = '1xH200-single'").fetchone()
    assert act == ("bf16", "bf16")
    kv = con.execute(
        "select kv_bytes from device_memory where model = 'mamba-2.8b' and deployment = '1xH200-single' "
        "and workload = 'decode_b64_c32k'"
    ).fetchone()[0]
    assert kv == 64 * layers * (conv * 2 + ssm * 4)


@pytest.mark.parametrize(
    ("model", "per_token"),
    [
        # 32 layers × K, V × 8 KV heads × head_dim 128
        ("Meta-Llama-3.1-8B", lambda c: c["num_hidden_layers"] * 2 * c["num_key_value_heads"] * 128),
        # 61 layers × (kv_lora_rank 512 + qk_rope_head_dim 64)
        ("DeepSeek-V3", lambda c: c["num_hidden_layers"] * (c["kv_lora_rank"] + c["qk_rope_head_dim"])),
    ],
)
def test_attention_caches_follow_the_kv_dtype_unchanged(con, model, per_token):
    """Pure-attention models: every cache is kv-rule, so bytes per token = elements × the row's
    dtype, as before (Llama-3.1-8B bf16 131,072 B; DeepSeek-V3 bf16 70,272 B)."""
    cfg = _cfg(
        {"Meta-Llama-3.1-8B": "meta-llama__Meta-Llama-3.1-8B.json", "DeepSeek-V3": "deepseek-ai__DeepSeek-V3.json"}[
            model
        ]
    )
    elements = per_token(cfg)
    got = dict(con.execute("select dtype, bytes_per_token from kv_per_token where model = ?", [model]).fetchall())
    assert got == {d: elements * b for d, b in BYTES.items()}
    assert {"Meta-Llama-3.1-8B": 131_072, "DeepSeek-V3": 70_272}[model] == elements * 2
    rules = {r[0] for r in con.execute("select distinct dtype from base_caches where model = ?", [model]).fetchall()}
    assert rules == {"kv"}


def _specs(tmp_path: Path, old: str, new: str) -> Path:
    comps, models = tmp_path / "components", tmp_path / "models"
    comps.mkdir()
    models.mkdir()
    text = (COMPONENTS_DIR / "mamba_mixer.yaml").read_text()
    assert text.count(old) == 1
    (comps / "mamba_mixer.yaml").write_text(text.replace(old, new))
    model = (MODELS_DIR / "mamba-2.8b.yaml").read_text()
    model = model.replace("config: ArthurZ__mamba-2.8b.json", f"config: {CONFIGS / 'ArthurZ__mamba-2.8b.json'}")
    (models / "mamba-2.8b.yaml").write_text(model)
    return models / "mamba-2.8b.yaml"


@pytest.mark.parametrize(
    ("new", "message"),
    [
        ("growth: state, dtype: fp9 }", r"cache dtype 'fp9'.*did you mean 'fp8'"),
        ("growth: state, dtype: act, scale: { dtype: fp32, per: 128 } }", r"a scale goes with a fixed cache dtype"),
        ("growth: state, dtype: fp8, scale: { dtype: fp32, per: 0 } }", r"scale.per is the elements per scale"),
    ],
)
def test_bad_cache_dtype_rules_are_located_errors(tmp_path, new, message):
    model = _specs(tmp_path, "growth: state, dtype: fp32 }", new)
    library = load_library(components_dir=tmp_path / "components", models_dir=tmp_path / "models")
    # a name the dtypes table lacks is found when the cache is evaluated (a ShapeError of the
    # walk), a malformed rule when the component is parsed (a SpecError): both located
    with pytest.raises(ArchsqlError, match=f"(?s){message}") as info:
        evaluate(model, library=library)
    assert any(i.file and i.file.endswith("mamba_mixer.yaml") and i.line for i in info.value.issues)
