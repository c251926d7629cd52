"""The model editor: DeepSeek-V3 with MLA → DSA (indexer dims from DeepSeek-V3.2's config) in
every layer group, GQA 8 → 4 KV heads, attention → gated DeltaNet; old → new ledgers checked
against derivations from the configs; derived models are YAML the library loads."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from archsql.cli import cli
from archsql.design.edit import Swap, derive, edit_model
from archsql.errors import DesignError, SpecError
from archsql.specs import CONFIGS_DIR

BF16 = 2
CTX = 65536  # 64K


def config(name: str) -> dict:
    return json.loads((CONFIGS_DIR / name).read_text())


V3 = config("deepseek-ai__DeepSeek-V3.json")
V32 = config("deepseek-ai__DeepSeek-V3.2.json")
LLAMA = config("meta-llama__Meta-Llama-3.1-8B.json")


def indexer_params(cfg: dict) -> int:
    """Lightning-indexer weights of one layer (DeepSeek-V3.2-Exp inference/model.py, Indexer)."""
    heads, dim = cfg["index_n_heads"], cfg["index_head_dim"]
    wq_b = cfg["q_lora_rank"] * heads * dim
    wk = cfg["hidden_size"] * dim
    k_norm = 2 * dim  # LayerNorm: weight and bias
    weights_proj = cfg["hidden_size"] * heads
    return wq_b + wk + k_norm + weights_proj


@pytest.fixture(scope="module")
def dsa(tmp_path_factory):
    root = tmp_path_factory.mktemp("edit")
    return edit_model(
        "DeepSeek-V3",
        swaps=[Swap("attention", "mla_dsa_attention")],
        dims_from="DeepSeek-V3.2",
        out_dir=root / "designs",
        db=root / "design.duckdb",
        context="64k",
        deployment="8xH200-tp8-ep8-wfp8",
    )


def ledger(report, quantity: str, template: str | None = None, scope: str = "group") -> dict:
    for row in report.ledger.to_pylist():
        if row["scope"] == scope and row["quantity"] == quantity and (scope == "model" or row["template"] == template):
            return row
    raise KeyError((scope, template, quantity))


def test_dsa_adds_exactly_the_indexer_weights_per_layer(dsa):
    layers = {"dense": V3["first_k_dense_replace"], "moe": V3["num_hidden_layers"] - V3["first_k_dense_replace"]}
    layers["mtp"] = V3["num_nextn_predict_layers"]
    per_layer = indexer_params(V32)
    for template, n in layers.items():
        row = ledger(dsa, "params", template)
        assert row["layers_old"] == row["layers_new"] == n
        assert row["delta"] == n * per_layer
    assert ledger(dsa, "params", scope="model")["delta"] == sum(layers.values()) * per_layer
    assert ledger(dsa, "params", None)["delta"] == 0  # embedding, norm, lm_head untouched


def test_dsa_adds_exactly_the_index_key_cache(dsa):
    # one index key per token and layer, stored FP8 with one FP32 scale per 128 (DeepSeek-V3.2-Exp
    # inference/model.py Indexer: k_cache float8_e4m3fn [.., index_head_dim], k_scale_cache
    # float32 [.., index_head_dim // 128]), whatever the deployment's kv dtype
    per_layer_token = V32["index_head_dim"] * 1 + V32["index_head_dim"] // 128 * 4
    base_layers = V3["num_hidden_layers"]  # MTP layers keep no cache in the base model
    assert ledger(dsa, "kv_bytes_per_token", scope="model")["delta"] == base_layers * per_layer_token
    assert ledger(dsa, "kv_bytes_per_request", scope="model")["delta"] == base_layers * per_layer_token * CTX
    for template, n in (("dense", 3), ("moe", 58)):
        assert ledger(dsa, "kv_bytes_per_token", template)["delta"] == n * per_layer_token
        assert ledger(dsa, "kv_bytes_per_request", template)["delta"] == n * per_layer_token * CTX
    mla_token = (V3["kv_lora_rank"] + V3["qk_rope_head_dim"]) * BF16
    assert ledger(dsa, "kv_bytes_per_token", scope="model")["old"] == base_layers * mla_token


def test_dsa_prefill_flops_weights_and_sol_old_to_new(dsa):
    for template in ("dense", "moe"):
        flops = ledger(dsa, "prefill_flops", template)
        assert 0 < flops["new"] < flops["old"]  # 2048 selected keys instead of 64K at this context
        assert ledger(dsa, "weight_bytes", template)["delta"] > 0
    for quantity in ("prefill_time_s", "decode_time_s", "device_memory_bytes", "prefill_flops"):
        row = ledger(dsa, quantity, scope="model")
        assert row["old"] > 0 and row["new"] > 0
    assert dsa.deployment == "8xH200-tp8-ep8-wfp8" and dsa.context == CTX


def test_edited_v3_has_the_params_of_v32(dsa, catalog_db):
    """DeepSeek-V3.2 is DeepSeek-V3 with DSA: the edit lands on the same parameter count."""
    from archsql.api import query

    v32 = query("select params from model_summary where model = 'DeepSeek-V3.2'", db=catalog_db).to_pylist()
    assert ledger(dsa, "params", scope="model")["new"] == v32[0]["params"]


def test_derived_model_is_data(dsa, tmp_path):
    from archsql.api import build, query
    from archsql.evaluator import evaluate
    from archsql.specs import load_library

    d = dsa.derived
    text = d.path.read_text()
    assert "extends: DeepSeek-V3" in text
    assert "n_index_heads: 64" in text and "DeepSeek-V3.2: config.index_n_heads = 64" in text
    assert set(d.swapped) == {"dense.attention", "moe.attention", "mtp.attention"}
    library = load_library(models_dir=d.path.parent)
    assert library.model(d.path.stem).name == d.name
    assert evaluate(d.path.stem, library=library).model == d.name
    build([str(d.path)], db=tmp_path / "main.duckdb")  # `archsql build derived.yaml`
    assert query("select model from model_summary", db=tmp_path / "main.duckdb").to_pylist() == [{"model": d.name}]


def test_swap_in_chosen_layer_groups_only(tmp_path):
    r = edit_model(
        "DeepSeek-V3",
        swaps=[Swap("attention", "mla_dsa_attention", ("moe",))],
        dims_from="DeepSeek-V3.2",
        name="V3-dsa-moe",
        out_dir=tmp_path,
        db=tmp_path / "d.duckdb",
        context="8k",
    )
    assert ledger(r, "params", "dense")["delta"] == 0
    assert ledger(r, "params", "mtp")["delta"] == 0
    assert ledger(r, "params", "moe")["delta"] == 58 * indexer_params(V32)
    assert set(r.derived.swapped) == {"moe.attention"}


def test_gqa_8_to_4_kv_heads_halves_kv_per_token(tmp_path):
    r = edit_model("Meta-Llama-3.1-8B", set_dims={"n_kv_heads": 4}, out_dir=tmp_path, db=tmp_path / "d.duckdb")
    kv = ledger(r, "kv_bytes_per_token", scope="model")
    assert kv["new"] * 2 == kv["old"] and kv["ratio"] == 0.5
    head = LLAMA["hidden_size"] // LLAMA["num_attention_heads"]
    removed = 2 * LLAMA["hidden_size"] * (LLAMA["num_key_value_heads"] - 4) * head * LLAMA["num_hidden_layers"]
    assert ledger(r, "params", "dense")["delta"] == -removed
    assert r.derived.data["dims"] == {"n_kv_heads": 4}


def test_attention_to_gated_deltanet_lists_every_missing_dim(tmp_path):
    with pytest.raises(DesignError) as exc:
        derive("Meta-Llama-3.1-8B", swaps=[Swap("attention", "gated_deltanet")], out_dir=tmp_path)
    text = str(exc.value)
    assert "5 dims not bound" in text
    for dim in ("conv_kernel", "d_lin_k", "d_lin_v", "lin_k_heads", "lin_v_heads"):
        assert f"dim '{dim}'" in text and f"--set {dim}=" in text
    assert "gated_deltanet.yaml" in text  # where each is read
    assert not list(tmp_path.glob("*.yaml"))  # no half-bound draft left behind


def test_attention_to_gated_deltanet_drops_stale_dims(tmp_path):
    r = edit_model(
        "Meta-Llama-3.1-8B",
        swaps=[Swap("attention", "gated_deltanet")],
        dims_from="Qwen3.5-27B",
        out_dir=tmp_path,
        db=tmp_path / "d.duckdb",
        context="32k",
    )
    assert set(r.derived.dims_dropped) >= {"n_heads", "n_kv_heads", "d_head", "window"}
    assert all(r.derived.data["dims"][d] is None for d in r.derived.dims_dropped)
    assert ledger(r, "kv_bytes_per_token", scope="model")["new"] == 0
    assert ledger(r, "state_bytes_per_request", scope="model")["new"] > 0
    assert (
        ledger(r, "kv_bytes_per_request", scope="model")["new"]
        < ledger(r, "kv_bytes_per_request", scope="model")["old"]
    )


# ---------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"swaps": [Swap("attention", "mla_dsa_atention")]}, r"(?s)unknown component 'mla_dsa_atention'.*did you mean"),
        ({"swaps": [Swap("ffn", "gqa_attention")]}, r"(?s)role 'attention', but slot 'ffn'.*pre_norm_block\.yaml"),
        ({"swaps": [Swap("atention", "gqa_attention")]}, r"(?s)unknown slot 'atention'.*did you mean 'attention'"),
        ({"swaps": [Swap("attention", "gqa_attention", ("dens",))]}, r"(?s)unknown template 'dens'.*did you mean"),
        ({"set_dims": {"n_kv_head": 4}}, r"(?s)unknown dim in --set: n_kv_head.*did you mean 'n_kv_heads'"),
        ({"set_dims": {"d_index_head": 64}}, r"no node reads d_index_head"),
        ({}, r"nothing to edit"),
    ],
)
def test_bad_edits_are_located(tmp_path, kwargs, pattern):
    with pytest.raises(DesignError, match=pattern):
        derive("Meta-Llama-3.1-8B", out_dir=tmp_path, **kwargs)


def test_unknown_base_model(tmp_path):
    with pytest.raises(SpecError, match=r"(?s)unknown model 'DeepSeek-V4'.*did you mean"):
        derive("DeepSeek-V4", set_dims={"n_heads": 4}, out_dir=tmp_path)


def test_dim_bound_twice():
    from archsql.design.specs import parse_assignments

    with pytest.raises(DesignError, match="dim 'n_kv_heads' is bound twice: --set n_kv_heads=4 and --set n_kv_heads=2"):
        parse_assignments(["n_kv_heads=4", "n_kv_heads=2"])


def test_dim_bound_twice_in_a_derived_file_is_located(tmp_path):
    from archsql.evaluator import evaluate

    path = tmp_path / "twice.yaml"
    path.write_text("model: twice\nextends: Meta-Llama-3.1-8B\ndims:\n  n_kv_heads: 4\n  n_kv_heads: 2\n")
    with pytest.raises(SpecError, match=r"twice\.yaml:5:3 \$\.dims\.n_kv_heads: duplicate key 'n_kv_heads'"):
        evaluate(path)


# ---------------------------------------------------------------------------- CLI


def test_cli_edit(tmp_path):
    args = ["edit", "Meta-Llama-3.1-8B", "--set", "n_kv_heads=4", "--name", "llama-kv4", "--out", str(tmp_path)]
    args += ["--store", str(tmp_path / "d.duckdb"), "--context", "8k", "--deployment", "1xH200-single"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "llama-kv4 = Meta-Llama-3.1-8B + edits" in result.output
    assert "whole model" in result.output and "kv_bytes_per_token" in result.output
    assert (tmp_path / "llama-kv4.yaml").is_file()
    result = CliRunner().invoke(
        cli,
        [
            "edit",
            "Meta-Llama-3.1-8B",
            "--swap",
            "attention=gated_deltanet",
            "--out",
            str(tmp_path),
            "--store",
            str(tmp_path / "d"),
        ],
    )
    assert result.exit_code == 2 and "dims not bound" in result.output and "Traceback" not in result.output


# ---------------------------------------------------------------------------- the store's hardware, one precision


@pytest.fixture(scope="module")
def main_store(store_of, tmp_path_factory):
    """A store of Llama-3.1-8B with a GPU and a deployment added by the parameter commands."""
    import shutil

    db = tmp_path_factory.mktemp("main") / "main.duckdb"
    shutil.copy(store_of("Meta-Llama-3.1-8B"), db)
    runner = CliRunner()
    for args in (
        ["gpu", "add", "H200 NVL", "--like", "H200 SXM", "--set", "device_memory_MiB=100000", "--set", "sources=test"],
        [
            "deployment",
            "add",
            "2xNVL-tp2-wfp8",
            "--gpu",
            "H200 NVL",
            "--tp",
            "2",
            "--moe-tp",
            "2",
            "--weight-dtype",
            "fp8",
        ],
    ):
        result = runner.invoke(cli, ["--db", str(db), *args])
        assert result.exit_code == 0, result.output
    return db


def test_edit_reads_deployments_and_gpus_from_the_store(main_store, tmp_path):
    """`edit --deployment` sees a deployment (and its GPU) added to the store it is pointed at
    with --db; every weight row is in that deployment's profile (fp8), every KV row in its KV
    dtype (bf16), and device memory is over the GPU's 100000 MiB × 0.9."""
    import duckdb

    args = ["--db", str(main_store), "edit", "Meta-Llama-3.1-8B", "--set", "n_kv_heads=4", "--name", "kv4"]
    args += ["--out", str(tmp_path), "--store", str(tmp_path / "d.duckdb"), "--context", "8k"]
    result = CliRunner().invoke(cli, [*args, "--deployment", "2xNVL-tp2-wfp8", "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = {(r["scope"], r["template"], r["quantity"]): r for r in json.loads(result.stdout)}
    con = duckdb.connect(str(main_store), read_only=True)
    fp8, native = (
        con.execute(
            "select sum(total_bytes) from weight_storage where model = 'Meta-Llama-3.1-8B' "
            f"and profile = '{p}' and not is_buffer"
        ).fetchone()[0]
        for p in ("fp8", "native")
    )
    con.close()
    assert rows[("model", None, "weight_bytes")]["old"] == fp8 < native  # not the checkpoint's bf16
    # KV in the deployment's bf16: 32 layers × 2 (K, V) × 8 KV heads × 128 × 2 bytes
    assert rows[("model", None, "kv_bytes_per_token")]["old"] == 32 * 2 * 8 * 128 * 2
    assert rows[("model", None, "device_usable_bytes")]["old"] == 100000 * 2**20 * 0.9
    # a deployment the store does not have: named, with the store's own list
    bad = CliRunner().invoke(cli, [*args, "--deployment", "2xNVL-tp2-wfp9"])
    assert bad.exit_code == 2 and "did you mean '2xNVL-tp2-wfp8'?" in bad.output and str(main_store) in bad.output


def test_edit_kv_dtype_is_one_dtype_and_a_shortfall_is_said(main_store, tmp_path):
    """--dtype fp8 on a bf16-KV deployment: the KV rows and the device memory both hold fp8
    (a copy of the deployment, `+kv-fp8`): 32 × 2 × 8 × 128 × 1 byte = 65536 per token.  At
    128k × 64 requests one H200 cannot hold Llama-3.1-8B: the shortfall is a row and a line."""
    args = ["--db", str(main_store), "edit", "Meta-Llama-3.1-8B", "--set", "n_kv_heads=4", "--name", "kv4"]
    args += ["--out", str(tmp_path), "--store", str(tmp_path / "d.duckdb"), "--deployment", "1xH200-single"]
    result = CliRunner().invoke(cli, [*args, "--context", "128k", "-B", "64", "--dtype", "fp8"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())  # the title wraps to the table's width
    assert "weights bf16, KV fp8; SOL and device memory on 1xH200-single+kv-fp8" in text
    assert "old (Meta-Llama-3.1-8B) does not fit on 1xH200-single+kv-fp8:" in text
    assert "new (kv4) does not fit on 1xH200-single+kv-fp8:" in text
    rows = json.loads(
        CliRunner().invoke(cli, [*args, "--context", "128k", "-B", "64", "--dtype", "fp8", "--format", "json"]).stdout
    )
    by = {r["quantity"]: r for r in rows if r["scope"] == "model"}
    assert by["kv_bytes_per_token"]["old"] == 32 * 2 * 8 * 128 * 1 == 65536
    for side in ("old", "new"):  # short = held - usable
        held, usable = by["device_memory_bytes"][side], by["device_usable_bytes"][side]
        assert by["device_shortfall_bytes"][side] == pytest.approx(held - usable) and held > usable


def test_compare_reads_gpus_from_the_store(main_store, tmp_path):
    """`compare --gpu` takes a GPU added to the store (--db); one the store lacks is named
    with the closest one.  The probe's usable memory is the added GPU's 100000 MiB × 0.9."""
    import duckdb

    args = ["--db", str(main_store), "compare", "attention", "-C", "gqa_attention@Meta-Llama-3.1-8B"]
    args += ["--d-model", "1024", "--context", "1k", "--store", str(tmp_path / "c.duckdb")]
    result = CliRunner().invoke(cli, [*args, "--gpu", "H200 NVL", "--format", "csv"])
    assert result.exit_code == 0, result.output
    con = duckdb.connect(str(tmp_path / "c.duckdb"), read_only=True)
    (usable,) = con.execute(
        "select distinct usable_bytes from device_memory where deployment = (select any_value(deployment) "
        "from design_probes)"
    ).fetchone()
    con.close()
    assert usable == 100000 * 2**20 * 0.9
    bad = CliRunner().invoke(cli, [*args, "--gpu", "H200 NVLL"])
    assert bad.exit_code == 2 and "unknown GPU 'H200 NVLL'" in bad.output and "did you mean 'H200 NVL'?" in bad.output
