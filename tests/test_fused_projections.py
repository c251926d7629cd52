"""Fused projections of recurrent mixers under tensor parallelism: a fused axis is split
part by part (weight_axes ``fused``), never cut blindly; its slices stay sharded."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from archsql.errors import ShapeError
from archsql.evaluator import evaluate
from archsql.specs import COMPONENTS_DIR, CONFIGS_DIR, MODELS_DIR, load_library
from archsql.store import insert_deployments

CONFIGS = Path(__file__).parents[1] / "archsql" / "specs" / "configs"
NEMOTRON = "Nemotron-H-56B-Base-8K"


def _cfg(name: str) -> dict:
    return json.loads((CONFIGS / name).read_text())


@pytest.fixture(scope="module")
def tp_store(catalog_db, tmp_path_factory) -> duckdb.DuckDBPyConnection:
    """The catalog with two more layouts: 16 GPUs of tensor parallelism (more ranks than
    Nemotron-H's 8 B/C groups) and 32 (more than Qwen3.5's 16 linear-attention key heads)."""
    db = tmp_path_factory.mktemp("tp") / "store.duckdb"
    shutil.copy(catalog_db, db)
    con = duckdb.connect(str(db))
    rows = [{"deployment": f"{n}xH200-tp{n}", "gpus": n, "tp": n, "dp": 1, "ep": n, "moe_tp": 1} for n in (16, 32)]
    insert_deployments(con, rows, like="8xH200-tp8-ep8")
    assert con.execute("select * from deployment_checks").fetchall() == []
    return con


def _rows(con, model: str, deployment: str, uid_like: str) -> float:
    """Rows of one layer's weight on one device: its per-device elements / layers / in."""
    (elements,) = con.execute(
        "select sum(elements) from int_device_weights where model = ? and deployment = ? and uid like ? "
        "and tensor = 'weight'",
        [model, deployment, uid_like],
    ).fetchone()
    return elements


def test_mamba2_in_proj_splits_heads_and_groups_separately(tp_store):
    """Nemotron-H-56B: in_proj's output is [z | x | B | C | dt] = 2·H·P + 2·G·N + H rows
    (H = 256 heads of P = 64, G = 8 groups of N = 256 states).  On tp 8 a rank holds H/8 heads
    of z, x and dt and G/8 = 1 group of B and C; on tp 16 it holds H/16 heads but still one
    whole group (the fit rule: each group on two ranks) — not the fused rows ÷ 16."""
    cfg = _cfg("nvidia__Nemotron-H-56B-Base-8K.json")
    h, p, g, n = cfg["mamba_num_heads"], cfg["mamba_head_dim"], cfg["n_groups"], cfg["ssm_state_size"]
    d, kernel = cfg["hidden_size"], cfg["conv_kernel"]
    mamba_layers = cfg["hybrid_override_pattern"].count("M")
    fused = 2 * h * p + 2 * g * n + h
    for tp, groups_per_rank in ((8, 1), (16, 1)):
        rows = 2 * (h // tp) * p + 2 * groups_per_rank * n + h // tp
        deployment = "8xH200-tp8" if tp == 8 else "16xH200-tp16"
        got = _rows(tp_store, NEMOTRON, deployment, "decoder/mamba/mixer.in_proj")
        assert got == mamba_layers * rows * d
        conv = _rows(tp_store, NEMOTRON, deployment, "decoder/mamba/mixer.conv1d")
        assert conv == mamba_layers * ((h // tp) * p + 2 * groups_per_rank * n) * kernel
    blind = _rows(tp_store, NEMOTRON, "1xH200-single", "decoder/mamba/mixer.in_proj") / 16
    assert blind == mamba_layers * fused * d / 16
    assert _rows(tp_store, NEMOTRON, "16xH200-tp16", "decoder/mamba/mixer.in_proj") > blind


def test_gated_deltanet_qkv_splits_key_and_value_heads_separately(tp_store):
    """Qwen3.5-35B-A3B: in_proj_qkv's output is [q | k | v] = 2·Hk·dk + Hv·dv rows with
    Hk = 16 key heads, Hv = 32 value heads.  On tp 8 a rank holds 2 key heads of q and k and
    4 value heads; on tp 32 one key head each (every key head on two ranks) and one value
    head — 3·128 rows, not the fused rows ÷ 32."""
    cfg = _cfg("Qwen__Qwen3.5-35B-A3B.json")
    cfg = cfg.get("text_config", cfg)
    hk, hv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    dk, dv, d = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"], cfg["hidden_size"]
    layers = cfg["layer_types"].count("linear_attention")
    model = "Qwen3.5-35B-A3B"
    tp8 = _rows(tp_store, model, "8xH200-tp8", "decoder/linear/self_attn.in_proj_qkv")
    assert tp8 == layers * (2 * (hk // 8) * dk + (hv // 8) * dv) * d
    tp32 = _rows(tp_store, model, "32xH200-tp32", "decoder/linear/self_attn.in_proj_qkv")
    assert tp32 == layers * (2 * 1 * dk + 1 * dv) * d
    assert tp32 > layers * (2 * hk * dk + hv * dv) * d / 32


def test_slices_of_a_fused_axis_stay_sharded_without_gathers():
    """The slices of in_proj (gate, xBC, dt) and of the conv output (x, B, C) keep the
    attention split, each with its own whole pieces; the only collective of a Mamba2 layer
    is the all-reduce of out_proj's row-split pending sum before the residual add."""
    a = evaluate(NEMOTRON)
    lay = {
        (r["uid"].rsplit(".", 1)[-1], r["axis"]): (r["parts"], r["segments"])
        for r in a.tables["layouts"].to_pylist()
        if r["phase"] == "prefill"
        and r["uid"].startswith("decoder/mamba/mixer.")
        and r["tensor"] == "out"
        and r["group"] == "attention"
    }
    h, g, hp, gn = 256, 8, 256 * 64, 8 * 256
    assert lay[("gate", 2)] == (h, None) and lay[("dt", 2)] == (h, None)
    xbc = [{"size": hp, "parts": h}, {"size": gn, "parts": g}, {"size": gn, "parts": g}]
    assert lay[("xBC", 2)] == (None, xbc) and lay[("conv1d", 2)] == (None, xbc)
    assert lay[("x_heads", 2)] == (h, None) and lay[("B", 2)] == (g, None) and lay[("C", 2)] == (g, None)
    colls = {
        (c["consumer_uid"], c["kind"], c["group"])
        for c in a.tables["collectives"].to_pylist()
        if c["phase"] == "prefill"
        and c["consumer_uid"].startswith("decoder/mamba/")
        and not c["group"].startswith("cp")  # context parallelism collectives: none at cp 1
    }
    assert colls == {("decoder/mamba/residual", "all_reduce", "attention")}


def _broken_library(tmp_path, old: str, new: str):
    base = (COMPONENTS_DIR / "mamba2_mixer.yaml").read_text()
    assert old in base
    cdir, mdir = tmp_path / "components", tmp_path / "models"
    cdir.mkdir()
    mdir.mkdir()
    broken = base.replace(old, new).replace("component: mamba2_mixer", "component: mamba2_broken")
    (cdir / "mamba2_broken.yaml").write_text(broken)
    spec = (MODELS_DIR / f"{NEMOTRON}.yaml").read_text()
    spec = spec.replace("mixer: mamba2_mixer", "mixer: mamba2_broken").replace(f"model: {NEMOTRON}", "model: M")
    (mdir / "M.yaml").write_text(spec.replace("config: ", f"config: {CONFIGS_DIR}/", 1))
    return load_library(components_dir=cdir, models_dir=mdir), mdir, broken


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "{ size: ssm_heads, parts: ssm_heads }]",
            "]",
            "the fused segments must add up to the axis",
        ),
        (
            "{ size: ssm_heads, parts: ssm_heads }]",
            "{ size: ssm_heads, parts: d_state }]",
            "dim 'd_state' may not be split by group 'attention'",
        ),
        (
            "{ size: ssm_heads, parts: ssm_heads }]",
            "{ size: ssm_heads, parts: ssm_heads, fit: pad }]",
            "a segment is {size, parts}",
        ),
    ],
)
def test_fused_weight_axes_are_checked(tmp_path, old, new, message):
    library, mdir, broken = _broken_library(tmp_path, old, new)
    with pytest.raises(ShapeError) as exc:
        evaluate(mdir / "M.yaml", library=library)
    text = str(exc.value)
    lines = broken.splitlines()
    line = lines.index(next(x for x in lines if x.lstrip().startswith("in_proj:"))) + 3  # weight_axes line
    assert message in text
    assert f"mamba2_broken.yaml:{line}:" in text
    assert "$.graph.in_proj.weight_axes[0]" in text


# --- Mamba1 mixers (mamba_mixer, falcon_mamba_mixer, jamba_mamba_mixer) under tensor parallelism:
# sharded as vLLM's MambaMixer shards them — in_proj column-split over its fused [x | z]
# (two parts of d_inner), conv1d / dt_proj / A_log / D split over d_inner, x_proj and
# out_proj row-split (their d_inner input is the split one, their outputs pending sums).

JAMBA = "Jamba-v0.1"


def _device_weight(con, model: str, deployment: str, uid_like: str, tensor: str = "weight") -> tuple:
    """One Mamba layer's weight on one device: (per-axis device sizes, per-axis global sizes,
    elements over all layers, bytes over all layers)."""
    shape = con.execute(
        "select list(device_size order by axis), list(size order by axis) from int_device_shapes "
        "where model = ? and deployment = ? and uid = ? and tensor = ? and phase = 'prefill' "
        "and workload = (select min(workload) from workloads where phase = 'prefill')",
        [model, deployment, uid_like.replace("%", ""), tensor],
    ).fetchone()
    elements, nbytes = con.execute(
        "select sum(elements), sum(bytes) from int_device_weights where model = ? and deployment = ? "
        "and uid like ? and tensor = ?",
        [model, deployment, uid_like, tensor],
    ).fetchone()
    return tuple(shape[0]), tuple(shape[1]), elements, nbytes


def test_mamba1_weights_split_over_d_inner(tp_store):
    """Jamba-v0.1 on tp 8, derived by hand from its config:
    d_model = hidden_size = 4096; d_inner = mamba_expand × hidden_size = 2 × 4096 = 8192;
    dt_rank = mamba_dt_rank = 256; d_state = mamba_d_state = 16; conv_kernel = mamba_d_conv = 4;
    mamba_proj_bias false (no in/out_proj bias); bfloat16 (2 bytes an element).
    Mamba layers: every layer but those with i % attn_layer_period (8) == attn_layer_offset (4):
    32 − 4 = 28 of the num_hidden_layers = 32.
    Global → one device of tp 8 (vLLM MambaMixer):
      in_proj  [2·d_inner, d_model] = [16384, 4096] → [2·8192/8, 4096] = [2048, 4096]
               (1024 rows of x and 1024 of z: each half split on its own)
      conv1d   [d_inner, 1, kernel] = [8192, 1, 4]  → [1024, 1, 4]
      x_proj   [dt_rank + 2·d_state, d_inner] = [288, 8192] → [288, 1024]   (row split)
      dt_proj  [d_inner, dt_rank] = [8192, 256]     → [1024, 256]
      A_log    [d_inner, d_state] = [8192, 16]       → [1024, 16];  D [8192] → [1024]
      out_proj [d_model, d_inner] = [4096, 8192]    → [4096, 1024]           (row split)
    Every one of these holds exactly 1/8 of the single-GPU elements and bytes."""
    cfg = _cfg("ai21labs__Jamba-v0.1.json")
    d, di = cfg["hidden_size"], cfg["mamba_expand"] * cfg["hidden_size"]
    r, n, k = cfg["mamba_dt_rank"], cfg["mamba_d_state"], cfg["mamba_d_conv"]
    period, offset = cfg["attn_layer_period"], cfg["attn_layer_offset"]
    layers = sum(1 for i in range(cfg["num_hidden_layers"]) if i % period != offset)
    assert (d, di, r, n, k, layers) == (4096, 8192, 256, 16, 4, 28)
    tp = 8
    expected = {  # node → (tensor, global shape, per-device shape)
        "in_proj": ("weight", (2 * di, d), (2 * (di // tp), d)),
        "conv1d": ("weight", (di, 1, k), (di // tp, 1, k)),
        "x_proj": ("weight", (r + 2 * n, di), (r + 2 * n, di // tp)),
        "dt_proj": ("weight", (di, r), (di // tp, r)),
        "scan": ("A_log", (di, n), (di // tp, n)),
        "out_proj": ("weight", (d, di), (d, di // tp)),
    }
    for node, (tensor, whole, local) in expected.items():
        uid = f"decoder/mamba%/self_attn.{node}"
        shape, global_shape, elements, nbytes = _device_weight(tp_store, JAMBA, "8xH200-tp8", uid, tensor)
        assert shape == local and global_shape == whole, node
        numel = 1
        for s in local:
            numel *= s
        assert elements == layers * numel, node
        assert nbytes == layers * numel * 2, node  # bfloat16
        _, _, single_elements, single_bytes = _device_weight(tp_store, JAMBA, "1xH200-single", uid, tensor)
        assert (single_elements, single_bytes) == (elements * tp, nbytes * tp), node
    for node, tensor in (("scan", "D"), ("dt_proj", "bias"), ("conv1d", "bias")):  # [d_inner] siblings
        uid = f"decoder/mamba%/self_attn.{node}"
        elements = _device_weight(tp_store, JAMBA, "8xH200-tp8", uid, tensor)[2]
        assert elements == layers * di // tp, (node, tensor)
    # the learned dt/B/C RMSNorm weights ([dt_rank], [d_state]) stay whole on every device
    for node, size in (("dt_layernorm", r), ("b_layernorm", n), ("c_layernorm", n)):
        elements = _device_weight(tp_store, JAMBA, "8xH200-tp8", f"decoder/mamba%/self_attn.{node}")[2]
        assert elements == layers * size, node


def _mamba1_collectives(model: str, mixer: str, residual: str) -> list[dict]:
    a = evaluate(model)
    return [
        c
        for c in a.tables["collectives"].to_pylist()
        if c["phase"] == "prefill"
        and (c["consumer_uid"].startswith(mixer) or c["consumer_uid"] == residual)
        and not c["group"].startswith("cp")  # context parallelism collectives: none at cp 1
    ]


def _comm_elements(model: str, uid_prefix: str) -> dict[str, float]:
    """Global elements each prefill collective of a layer communicates, per token (the
    coefficient of its B·s comm_elements term), keyed by the consumer's uid after the prefix."""
    a = evaluate(model)
    out: dict[str, float] = {}
    for t in a.tables["terms"].to_pylist():
        if (
            t["phase"] == "prefill"
            and t["quantity"] == "comm_elements"
            and t["uid"].startswith(uid_prefix)
            and "@" not in t["uid"]  # context parallelism collectives: none at cp 1
        ):
            assert (t["e_B"], t["e_s"], t["e_c"], t["factor"]) == (1, 1, 0, "none"), t
            key = t["uid"][len(uid_prefix) :].split("#")[0]
            out[key] = out.get(key, 0.0) + t["coef"]
    return out


def test_mamba1_collectives_are_the_x_proj_and_out_proj_reductions():
    """Jamba-v0.1's Mamba1 layer: the only collectives are all-reduces over the attention
    group of the two row-split projections' pending sums — x_proj's output (dt_rank + 2·d_state
    = 256 + 2·16 = 288 values a token, reduced as the three slices the dt/B/C RMSNorms read:
    256, 16 and 16) and out_proj's (d_model = 4096 a token) before the residual add.  No
    gathers: conv1d, dt_proj and the scan all work on the device's d_inner / tp channels."""
    cfg = _cfg("ai21labs__Jamba-v0.1.json")
    r, n, d = cfg["mamba_dt_rank"], cfg["mamba_d_state"], cfg["hidden_size"]
    colls = _mamba1_collectives(JAMBA, "decoder/mamba/self_attn.", "decoder/mamba/attn_residual")
    got = {(c["consumer_uid"].rsplit("/", 1)[-1], c["port"], c["kind"], c["group"]) for c in colls}
    assert got == {
        ("self_attn.dt_layernorm", 0, "all_reduce", "attention"),
        ("self_attn.b_layernorm", 0, "all_reduce", "attention"),
        ("self_attn.c_layernorm", 0, "all_reduce", "attention"),
        ("attn_residual", 1, "all_reduce", "attention"),
    }
    per_token = _comm_elements(JAMBA, "decoder/mamba/")
    assert per_token == {
        "self_attn.dt_layernorm": r,
        "self_attn.b_layernorm": n,
        "self_attn.c_layernorm": n,
        "attn_residual": d,
        "ffn_residual": d,  # the dense SwiGLU FFN after the mixer (row-split down_proj)
    }


def test_mamba1_x_proj_pending_sum_is_reduced_before_dt_proj():
    """mamba-2.8b (no norm between x_proj and dt_proj): d_model = hidden_size = 2560,
    d_inner = expand × hidden_size = 2 × 2560 = 5120, dt_rank = time_step_rank = 160,
    d_state = state_size = 16.  A device holds dt_proj's rows of its own d_inner / tp
    channels, so it needs the whole (reduced) time step: the mixer's reductions are x_proj's
    output, dt_rank + 2·d_state = 192 values a token — never d_inner = 5120."""
    cfg = _cfg("ArthurZ__mamba-2.8b.json")
    r, n, d = cfg["time_step_rank"], cfg["state_size"], cfg["hidden_size"]
    per_token = _comm_elements("mamba-2.8b", "decoder/mamba/")
    assert per_token.pop("residual") == d
    assert sum(per_token.values()) == r + 2 * n
    assert "mixer.scan" not in per_token or per_token["mixer.scan"] <= 2 * n
