"""Vision towers and DeepStack (Qwen3-VL-8B-Instruct): the image-patch input, its runtime
symbol v (image patches per request, the workload_images table), the vision layers, the
mergers and the DeepStack stream into the first decoder layers.

Parameters (total and per role, tensor names) are checked against transformers' inventory in
tests/test_inventory_params.py; the vision tower's size against vision_config in
tests/test_families_sparse.py.  Here: the DeepStack stream's wiring, and the vision FLOPs
of one image derived from vision_config with the arithmetic written out."""

from __future__ import annotations

import json
import shutil

import duckdb
import pytest

from archsql.errors import EvaluationError
from archsql.evaluator import evaluate
from archsql.evaluator.factors import factor_value
from archsql.evaluator.terms import B, S, V, to_terms
from archsql.specs import CONFIGS_DIR
from archsql.views import macro_files

MODEL = "Qwen3-VL-8B-Instruct"
CONFIG = json.loads((CONFIGS_DIR / "Qwen__Qwen3-VL-8B-Instruct.json").read_text())
VISION = CONFIG["vision_config"]


@pytest.fixture(scope="module")
def qwen3_vl():
    return evaluate(MODEL)


def _rows(analysis, table: str, **where) -> list[dict]:
    return [r for r in analysis.tables[table].to_pylist() if all(r.get(k) == v for k, v in where.items())]


def vision_flops_per_image() -> tuple[int, int]:
    """(α, β): FLOPs of one request's image of v patches are α·v + β·v² (prefill), from
    vision_config: h = hidden_size 1152, I = intermediate_size 4304, 16 heads of
    d_h = 72, depth 27, pixels per patch = 3 channels · 2 frames · 16² = 1536, merge m = 2² = 4
    patches per token, M = m·h = 4608, out = out_hidden_size 4096, 3 DeepStack levels.
      per patch: patch_embed 2·h·pixels + h (bias); interpolated positions 7·h (4 weighted
        rows); their sum h.
      per patch and ViT layer: LayerNorms 2 · 7·h; qkv 2·h·3h + 3h; rope on q and k
        2 · 3·h; proj 2·h² + h; residual adds 2·h; linear_fc1 2·h·I + I; GELU 8·I;
        linear_fc2 2·I·h + h  →  8·h² + 4·h·I + 9·I + 27·h.
      per patch², per layer: bidirectional attention heads·(4·d_h + 5) (q·kᵀ, softmax,
        probs·v over all v patches of the image).
      merger (norm before the merge): LayerNorm 7·h per patch, then per token (v/m of them)
        fc1 2·M² + M, GELU 8·M, fc2 2·M·out + out.
      each DeepStack merger (norm after the merge): LayerNorm 7·M per token, the same fc1,
        GELU and fc2, and adding its out features at the image positions (out per token).
    Placing the merged tokens among the text embeddings is a copy (no FLOPs)."""
    h, inter, heads = VISION["hidden_size"], VISION["intermediate_size"], VISION["num_heads"]
    dh, depth, out = h // heads, VISION["depth"], VISION["out_hidden_size"]
    pixels = VISION["in_channels"] * VISION["temporal_patch_size"] * VISION["patch_size"] ** 2
    m = VISION["spatial_merge_size"] ** 2
    big = m * h
    mlp = (2 * big * big + big) + 8 * big + (2 * big * out + out)  # per merged token
    alpha = (2 * h * pixels + h) + 7 * h + h
    alpha += depth * (8 * h * h + 4 * h * inter + 9 * inter + 27 * h)
    alpha += 7 * h + mlp // m
    alpha += len(VISION["deepstack_visual_indexes"]) * ((7 * big + mlp + out) // m)
    beta = depth * heads * (4 * dh + 5)
    return alpha, beta


def test_deepstack_stream_feeds_the_first_decoder_layers(qwen3_vl):
    """The vision hidden state after layers 8, 16, 24 (deepstack_visual_indexes) is element
    j of the stream; decoder layer j (j < 3) reads it, turns it into image tokens with
    model.visual.deepstack_merger_list.j and adds them at the image positions."""
    idx = VISION["deepstack_visual_indexes"]
    reads = [(r["stack"], r["layer"], r["element_layers"]) for r in _rows(qwen3_vl, "stream_reads", stream="deepstack")]
    assert reads == [("decoder", j, [i]) for j, i in enumerate(idx)]
    (stream,) = _rows(qwen3_vl, "streams", stream="deepstack")
    assert (stream["stack"], stream["read"], stream["archive_at"], stream["layers"]) == ("visual", "each", "after", idx)
    edges = {(e["src_uid"], e["dst_uid"]) for e in _rows(qwen3_vl, "edges", stream="deepstack", phase="prefill")}
    assert edges == {("visual/vit/mlp_residual", "decoder/deep/deepstack_merger.merged")}
    schedule = [
        r["template"] for r in sorted(_rows(qwen3_vl, "layer_schedule", stack="decoder"), key=lambda r: r["layer"])
    ]
    assert schedule == ["deep"] * len(idx) + ["dense"] * (CONFIG["text_config"]["num_hidden_layers"] - len(idx))
    names = {w["name"] for w in _rows(qwen3_vl, "weights") if w["uid"].startswith("decoder/deep/deepstack_merger.")}
    assert "model.visual.deepstack_merger_list.{layer}.linear_fc1.weight" in names
    shape = [
        r["dim"]
        for r in sorted(
            _rows(qwen3_vl, "shapes", uid="decoder/deep/deepstack_add", phase="prefill"), key=lambda r: r["axis"]
        )
    ]
    assert shape == ["B", "s", "d_model"]


def test_vision_terms_carry_the_patches_factor(qwen3_vl):
    """A ViT layer's attention is heads·(4·d_h + 5)·B·v² per layer: one term row with the
    factor patches^2; its qkv projection B·v·(2·h·3h + 3h): patches^1."""
    h, heads = VISION["hidden_size"], VISION["num_heads"]
    terms = _rows(qwen3_vl, "terms", uid="visual/vit/attention", phase="prefill", quantity="flops")
    assert [(t["coef"], t["e_B"], t["e_s"], t["e_c"], t["factor"], t["factor_arg"]) for t in terms] == [
        (heads * (4 * (h // heads) + 5), 1, 0, 0, "patches", 2)
    ]
    (qkv,) = _rows(qwen3_vl, "terms", uid="visual/vit/qkv", phase="prefill", quantity="flops")
    assert (qkv["coef"], qkv["factor"], qkv["factor_arg"]) == (2 * h * 3 * h + 3 * h, "patches", 1)


def test_image_flops_in_the_views(catalog_db, tmp_path):
    """flops at a workload with image patches = the same workload text-only + B·(α·v + β·v²);
    a workload without a workload_images row has no vision FLOPs at all."""
    alpha, beta = vision_flops_per_image()
    db = tmp_path / "store.duckdb"
    shutil.copy(catalog_db, db)
    con = duckdb.connect(str(db))
    con.execute("delete from workloads")
    con.execute("insert into workloads values ('text', 'prefill', 2, 2048, 2048), ('image', 'prefill', 2, 2048, 2048)")
    patches = 4096  # a 1024 × 1024 image: 64 × 64 patches of 16 pixels, 1024 image tokens
    con.execute("insert into workload_images values ('image', ?)", [patches])
    flops = dict(con.execute("select workload, flops from flops where model = ?", [MODEL]).fetchall())
    assert flops["image"] - flops["text"] == pytest.approx(2 * (alpha * patches + beta * patches**2), rel=1e-12)
    vision = dict(
        con.execute("select workload, flops from flops_by_role where model = ? and role = 'vision'", [MODEL]).fetchall()
    )
    assert vision.get("text", 0) == 0
    assert vision["image"] == pytest.approx(2 * (alpha * patches + beta * patches**2), rel=1e-12)
    # a text-only model ignores images
    other = dict(con.execute("select workload, flops from flops where model = 'Qwen3-8B'").fetchall())
    assert other["image"] == other["text"]


def test_patches_factor_macro_equals_factor_value():
    """The SQL term_factor macro and factors.factor_value agree on v^k; the 4-argument call
    (text-only workloads) keeps v = 0."""
    con = duckdb.connect()
    for f in macro_files():
        con.execute(f.sql)
    for v, k in [(0, 1), (1, 2), (4096, 1), (4096, 2), (123_457, 2)]:
        got = con.execute("select term_factor('patches', ?::bigint, 7::bigint, 9::bigint, v := ?::bigint)", [k, v])
        assert got.fetchone()[0] == factor_value("patches", k, 7, 9, v) == v**k
    assert con.execute("select term_factor('patches', 1::bigint, 7::bigint, 9::bigint)").fetchone()[0] == 0


def test_image_patches_never_meet_tokens_or_context():
    """A vision term is coef · B^a · v^k: v multiplied by s, c or another named factor has no
    term row, and is rejected with the form that works."""
    assert to_terms(3 * B * V**2) == [(3.0, 1, 0, 0, "patches", 2)]
    with pytest.raises(EvaluationError, match=r"coef · B\^a · v\^k"):
        to_terms(B * S * V)


def test_pixel_values_is_an_image_patch_input(qwen3_vl):
    """pixel_values is [B, v]: the patch embedding reads each patch's pixels; merging 2 × 2
    patches gives v / 4 image tokens of 4·h features."""

    def shape(uid: str) -> list[str]:
        rows = sorted(_rows(qwen3_vl, "shapes", uid=uid, phase="prefill"), key=lambda r: r["axis"])
        return [r["dim"] for r in rows]

    assert shape("patch_embed") == ["B", "v", "d_vision"]
    assert shape("merger_tokens") == ["B", "v / vision_merge_tokens", "vision_merge_tokens * d_vision"]
    assert shape("inputs_embeds") == ["B", "s", "d_model"]
