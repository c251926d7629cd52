"""Streams: values that cross layers besides the carried residual (docs/specir.md "Streams").

Every model here is a small synthetic spec written into a temp library: Meta-Llama-3.1-8B
(32 layers, 32 query heads, 8 KV heads of 128, d_model 4096) with one construct changed.

* internal streams — CLA/YOCO-style KV reuse: odd layers attend the keys and values of the
  even layer before them (streams ``shared_k`` / ``shared_v``) and declare no cache, so
  the KV cache is stored once per layer pair and halves; the readers' decode cache reads
  stay on the readers.  GLM-5.2 (catalog): IndexShare, the "shared" layers read the top-k
  positions of the latest "full" layer.
* append streams — ``read: each`` (DeepStack: the j-th reading layer of a later stack gets
  the j-th archived layer's output), ``read: all`` (depth mixing: every layer reads all
  outputs archived so far, evaluated as one group per history length), ``read: concat``
  (EAGLE-3-style features of chosen layers joined for a head in the model graph),
  ``before:`` (the value entering a layer).
* bad input — each rejection located at file:line with its YAML path and the fix.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import duckdb
import pytest

from archsql import store
from archsql.errors import ArchsqlError, SpecError
from archsql.evaluator import evaluate
from archsql.specs import COMPONENTS_DIR, CONFIGS_DIR, MODELS_DIR, load_library
from tests.test_spec_errors import assert_all_located, edit, line_of, located

CONFIG = json.loads((CONFIGS_DIR / "meta-llama__Meta-Llama-3.1-8B.json").read_text())
LAYERS, KV_HEADS, D_HEAD = CONFIG["num_hidden_layers"], CONFIG["num_key_value_heads"], 128
D_MODEL, HEADS = CONFIG["hidden_size"], CONFIG["num_attention_heads"]
LLAMA = (
    (MODELS_DIR / "Meta-Llama-3.1-8B.yaml")
    .read_text()
    .replace(
        "config: meta-llama__Meta-Llama-3.1-8B.json", f"config: {CONFIGS_DIR / 'meta-llama__Meta-Llama-3.1-8B.json'}"
    )
)
GQA = (COMPONENTS_DIR / "gqa_attention.yaml").read_text()
BLOCK = (COMPONENTS_DIR / "pre_norm_block.yaml").read_text()
LLAMA_STACK = """templates:
  dense: {}
stacks:
  decoder:
    repeat: n_layers
    path: model.layers
    streams: { hidden: { carries: true } }
    schedule: dense"""


class Lib:
    """A temp library: components added or overriding the real ones, models by name."""

    def __init__(self, root: Path):
        self.components, self.models = root / "components", root / "models"
        self.components.mkdir()
        self.models.mkdir()

    def component(self, name: str, text: str) -> Path:
        path = self.components / f"{name}.yaml"
        path.write_text(text)
        return path

    def model(self, name: str, text: str) -> Path:
        path = self.models / f"{name}.yaml"
        path.write_text(text.replace("model: Meta-Llama-3.1-8B", f"model: {name}"))
        return path

    def evaluate(self, path: Path):
        return evaluate(path, library=load_library(components_dir=self.components, models_dir=self.models))

    def reject(self, path: Path) -> ArchsqlError:
        with pytest.raises(ArchsqlError) as info:
            self.evaluate(path)
        assert_all_located(info.value)
        return info.value


@pytest.fixture
def lib(tmp_path: Path) -> Lib:
    return Lib(tmp_path)


def rows(analysis, table: str, **where) -> list[dict]:
    return [r for r in analysis.tables[table].to_pylist() if all(r.get(k) == v for k, v in where.items())]


def stream_edges(analysis, stream: str, phase: str = "prefill") -> set[tuple]:
    return {(e["src_uid"], e["dst_uid"], e["port"]) for e in rows(analysis, "edges", stream=stream, phase=phase)}


def shape(analysis, uid: str, phase: str = "prefill") -> list[str]:
    return [r["dim"] for r in sorted(rows(analysis, "shapes", uid=uid, phase=phase), key=lambda r: r["axis"])]


def counts(analysis) -> dict[str, int]:
    return {r["uid"]: r["count"] for r in analysis.tables["instances"].to_pylist()}


# --------------------------------------------------------------------------- CLA: internal streams


def cla_component() -> str:
    """gqa_attention without K/V projections and caches: it reads the keys and values of the
    layer before through the streams shared_k / shared_v."""
    text = GQA.replace("component: gqa_attention", "component: gqa_attention_cla")
    text = edit(
        text,
        """cache:
  family: kv
  entries:
    - { node: k_rope,  kind: key,   growth: window, window: window }
    - { node: v_heads, kind: value, growth: window, window: window }
""",
        "reads: [shared_k, shared_v]\n",
    )
    kept = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        drop = line.lstrip().startswith(("k_proj:", "v_proj:", "k_heads:", "v_heads:", "k_rope:"))
        if drop or (
            line.startswith("             weight_axes") and lines[i - 1].lstrip().startswith(("k_proj", "v_proj"))
        ):
            continue
        kept.append(line)
    text = "\n".join(kept) + "\n"
    text = edit(text, "in: [q_rope, k_rope]", "in: [q_rope, shared_k]")
    return edit(text, "in: [probs, v_heads]", "in: [probs, shared_v]")


CLA_STACK = """templates:
  kv: {}
  reuse: { attention: gqa_attention_cla }
stacks:
  decoder:
    repeat: n_layers
    path: model.layers
    streams:
      hidden: { carries: true }
      shared_k: { from: self_attn.k_rope, src: "a reusing layer attends the keys of the layer before: `key_states = kv_cache[kv_layer][0]`" }
      shared_v: { from: self_attn.v_heads, src: "and its values: `value_states = kv_cache[kv_layer][1]`" }
    schedule:
      - { template: kv, layers: "0::2" }
      - { template: reuse, layers: "1::2" }"""


def cla_model(lib: Lib, stack: str = CLA_STACK, name: str = "CLA") -> Path:
    lib.component("gqa_attention_cla", cla_component())
    return lib.model(name, edit(LLAMA, LLAMA_STACK, stack))


def test_internal_stream_edges_shapes_and_counts(lib):
    """Each reusing layer 2k+1 reads the keys/values of layer 2k: edges from the kv template's
    k_rope / v_heads into the reuse template's scores / attn (port 1), labelled with the
    stream; the reused tensors keep the producer's shape; 16 layers of each template."""
    a = lib.evaluate(cla_model(lib))
    for phase in ("prefill", "decode"):
        assert stream_edges(a, "shared_k", phase) == {
            ("decoder/kv/self_attn.k_rope", "decoder/reuse/self_attn.scores", 1)
        }
        assert stream_edges(a, "shared_v", phase) == {
            ("decoder/kv/self_attn.v_heads", "decoder/reuse/self_attn.attn", 1)
        }
    assert shape(a, "decoder/kv/self_attn.k_rope") == ["B", "s", "n_kv_heads", "d_head"]
    assert shape(a, "decoder/reuse/self_attn.scores") == ["B", "n_heads", "s", "c"]
    n = counts(a)
    assert n["decoder/kv/self_attn.k_proj"] == n["decoder/reuse/self_attn.q_proj"] == LAYERS // 2
    assert "decoder/reuse/self_attn.k_proj" not in n
    reads = rows(a, "stream_reads", stream="shared_k")
    assert [(r["layer"], r["element_layers"]) for r in reads] == [(j, [j - 1]) for j in range(1, LAYERS, 2)]
    (row,) = rows(a, "streams", stream="shared_k")
    assert row["kind"] == "internal" and row["layers"] == list(range(0, LAYERS, 2))
    assert row["producers"] == ["decoder/kv/self_attn.k_rope"]
    assert row["readers"] == ["decoder/reuse/self_attn.scores"]
    assert "`key_states = kv_cache[kv_layer][0]`" in row["src"]


def test_cla_stores_the_reused_cache_once_and_counts_reads_on_the_reader(lib, tmp_path):
    """KV bytes per token halve: the base model keeps K and V of n_kv_heads × d_head in all
    32 layers, 2 · 8 · 128 · 32 = 65,536 elements per token; CLA only in the 16 producing
    layers, 32,768.  Decode still reads K and V of c positions in every layer — the reusing
    layer's reads are its own cache_read terms (2 · B · 8 · 128 · c per layer and tensor)."""
    a = lib.evaluate(cla_model(lib))
    base = evaluate("Meta-Llama-3.1-8B")
    assert {r["uid"] for r in rows(a, "caches")} == {"decoder/kv/self_attn.k_rope", "decoder/kv/self_attn.v_heads"}
    db = tmp_path / "store.duckdb"
    tables = {name: _concat(base.tables[name], a.tables[name]) for name in a.tables}
    store.write_store(db, tables)
    con = store.connect(db)
    kv = dict(con.execute("select model, elements_per_token from kv_per_token where dtype = 'bf16'").fetchall())
    full = 2 * KV_HEADS * D_HEAD * LAYERS
    assert kv == {"Meta-Llama-3.1-8B": full, "CLA": full // 2}
    reads = {
        r["uid"]: r["coef"]
        for r in rows(a, "terms", phase="decode", quantity="cache_read_elements")
        if r["e_B"] == 1 and r["e_c"] == 1
    }
    per_layer = KV_HEADS * D_HEAD
    assert reads == {
        "decoder/kv/self_attn.scores": per_layer,
        "decoder/kv/self_attn.attn": per_layer,
        "decoder/reuse/self_attn.scores": per_layer,
        "decoder/reuse/self_attn.attn": per_layer,
    }
    con.close()


def _concat(*tables):
    import pyarrow as pa

    return pa.concat_tables(tables)


def test_glm_5_2_shares_top_k_indices_across_layers():
    """GLM-5.2: config.indexer_types marks 21 "full" layers (own lightning indexer, index-key
    cache) and 57 "shared" ones, which attend the top-k of the latest full layer before
    them and keep only the MLA latent and rope key."""
    cfg = json.loads((CONFIGS_DIR / "zai-org__GLM-5.2.json").read_text())
    types = cfg["indexer_types"]
    full = [i for i, t in enumerate(types) if t == "full"]
    a = evaluate("GLM-5.2")
    (row,) = rows(a, "streams", stream="topk")
    assert row["layers"] == full and row["kind"] == "internal"
    assert set(row["producers"]) == {"decoder/full_dense/self_attn.index_topk", "decoder/full_moe/self_attn.index_topk"}
    reads = {r["layer"]: r["element_layers"] for r in rows(a, "stream_reads", stream="topk")}
    assert reads == {j: [max(i for i in full if i < j)] for j, t in enumerate(types) if t == "shared"}
    assert stream_edges(a, "topk", "decode") == {
        ("decoder/full_moe/self_attn.index_topk", "decoder/shared_moe/self_attn.scores", 2),
        ("decoder/full_dense/self_attn.index_topk", "decoder/shared_moe/self_attn.scores", 2),
    }
    schedule = collections.Counter(r["template"] for r in rows(a, "layer_schedule", stack="decoder"))
    assert schedule == {"full_dense": 3, "full_moe": len(full) - 3, "shared_moe": types.count("shared")}
    index_caches = [r["uid"] for r in rows(a, "caches", kind="index_key") if r["uid"].startswith("decoder/")]
    assert sorted(index_caches) == [
        "decoder/full_dense/self_attn.index_k_rope",
        "decoder/full_moe/self_attn.index_k_rope",
    ]
    n = counts(a)
    assert n["decoder/full_dense/self_attn.index_wk"] + n["decoder/full_moe/self_attn.index_wk"] == len(full)


# --------------------------------------------------------------------------- append streams

DEEPSTACK_BLOCK = BLOCK.replace("component: pre_norm_block", "component: deepstack_block").replace(
    "inputs: [x]", "inputs: [x]\nreads: [deepstack]"
)
DEEPSTACK_BLOCK = edit(
    DEEPSTACK_BLOCK,
    "outputs: [ffn_residual]",
    "  deepstack_add: { op: add, in: [ffn_residual, deepstack], role: residual }\noutputs: [deepstack_add]",
)
TWO_STACKS = """templates:
  enc: {}
  dense: {}
  deep: { block: deepstack_block }
stacks:
  encoder:
    repeat: 4
    path: model.encoder.layers
    streams:
      hidden: { carries: true }
      deepstack:
        from: hidden
        after: [0, 1, 2]
        read: each
        src: "chosen encoder layers' outputs are kept: `deepstack_feature_lists.append(deepstack_feature)`"
      features:
        from: mlp.down_proj
        after: [1, 3]
        read: concat
        src: "the draft head reads several layers: `torch.cat(aux_hidden_states, dim=-1)`"
    schedule: enc
  decoder:
    repeat: n_layers
    path: model.layers
    streams: { hidden: { carries: true } }
    schedule:
      - { template: deep, layers: "0:3" }
      - { template: dense, layers: "3:" }"""
TWO_STACKS_GRAPH = """  encoder:      { stack: encoder, in: embed_tokens }
  decoder:      { stack: decoder, in: encoder }
  draft_fc:     { op: linear, in: encoder.features, dims: { in: "2 * d_model", out: d_model } }"""


def deep_model(lib: Lib, stack: str = TWO_STACKS, graph: str = TWO_STACKS_GRAPH) -> Path:
    lib.component("deepstack_block", DEEPSTACK_BLOCK)
    text = edit(LLAMA, LLAMA_STACK, stack)
    text = edit(text, "  decoder:      { stack: decoder, in: embed_tokens }", graph)
    return lib.model("Deep", edit(text, "outputs: [lm_head]", "outputs: [lm_head, draft_fc]"))


def test_append_each_gives_the_jth_reading_layer_the_jth_element(lib):
    """DeepStack: the encoder archives its output after layers 0, 1, 2; decoder layer j
    (j < 3, template deep) adds element j.  One template, three reading layers, three
    producers (one encoder template)."""
    a = lib.evaluate(deep_model(lib))
    reads = rows(a, "stream_reads", stream="deepstack")
    assert [(r["stack"], r["layer"], r["element_layers"]) for r in reads] == [("decoder", j, [j]) for j in range(3)]
    assert stream_edges(a, "deepstack") == {("encoder/enc/ffn_residual", "decoder/deep/deepstack_add", 1)}
    assert shape(a, "decoder/deep/deepstack_add") == ["B", "s", "d_model"]
    n = counts(a)
    assert n["decoder/deep/deepstack_add"] == 3 and n["encoder/enc/mlp.down_proj"] == 4
    (row,) = rows(a, "streams", stream="deepstack")
    assert (row["stack"], row["kind"], row["read"], row["archive_at"], row["layers"]) == (
        "encoder",
        "append",
        "each",
        "after",
        [0, 1, 2],
    )


def test_append_concat_joins_chosen_layers_for_a_model_graph_reader(lib):
    """EAGLE-3-style: down_proj outputs of encoder layers 1 and 3 joined along the last axis
    ([B, s, 2·d_model]) feed a linear in the model graph ('in: encoder.features')."""
    a = lib.evaluate(deep_model(lib))
    assert stream_edges(a, "features") == {("encoder/enc/mlp.down_proj", "draft_fc", 0)}
    (flops,) = rows(a, "terms", uid="draft_fc", phase="prefill", quantity="flops")
    assert flops["coef"] == 2 * (2 * D_MODEL) * D_MODEL
    (reads,) = rows(a, "stream_reads", stream="features")
    assert (reads["stack"], reads["elements"], reads["element_layers"]) == (None, 2, [1, 3])


def test_append_before_archives_the_value_entering_a_layer(lib):
    """before: [0, 16] archives the residual entering layers 0 and 16: the stack's input
    (the embedding) and the output of layer 15."""
    stack = edit(
        LLAMA_STACK,
        "    streams: { hidden: { carries: true } }",
        """    streams:
      hidden: { carries: true }
      entries: { from: hidden, before: [0, 16], read: concat, src: "inputs of chosen layers: `all_hidden_states += (hidden_states,)`" }""",
    )
    text = edit(LLAMA, LLAMA_STACK, stack)
    text = edit(
        text,
        "outputs: [lm_head]",
        '  probe:        { op: linear, in: decoder.entries, dims: { in: "2 * d_model", out: d_model } }\n'
        "outputs: [lm_head, probe]",
    )
    a = lib.evaluate(lib.model("Entries", text))
    assert stream_edges(a, "entries") == {("embed_tokens", "probe", 0), ("decoder/dense/ffn_residual", "probe", 0)}
    (reads,) = rows(a, "stream_reads", stream="entries")
    assert reads["element_layers"] == [0, 16]


DEPTH_BLOCK = BLOCK.replace("component: pre_norm_block", "component: depth_mix_block").replace(
    "inputs: [x]", "inputs: [x]\nreads: [history]"
)
DEPTH_BLOCK = edit(
    DEPTH_BLOCK,
    "outputs: [ffn_residual]",
    """  depth_q:   { op: linear, in: ffn_residual, dims: { in: d_model, out: d_model } }
  depth_q1:  { op: view_split, in: depth_q, dims: { parts: [1, d_model] } }
  depth_w:   { op: mul, in: [history, depth_q1] }
  depth_sum: { op: reduce_sum, in: depth_w, dims: { axis: [2] } }
  out:       { op: add, in: [ffn_residual, depth_sum], role: residual }
outputs: [out]""",
)
DEPTH_STACK = """templates:
  plain: {}
  mix: { block: depth_mix_block }
stacks:
  decoder:
    repeat: n_layers
    path: model.layers
    streams:
      hidden: { carries: true }
      history:
        from: hidden
        after: { every: 8 }
        read: all
        src: "each layer mixes the outputs kept so far: `h = h + (torch.stack(outs, 2) * q).sum(2)`"
    schedule:
      - { template: plain, layers: "0:8" }
      - { template: mix, layers: "8:" }"""


def depth_model(lib: Lib, stack: str = DEPTH_STACK) -> Path:
    lib.component("depth_mix_block", DEPTH_BLOCK)
    return lib.model("DepthMix", edit(LLAMA, LLAMA_STACK, stack))


def test_append_all_groups_layers_by_history_length(lib):
    """The output of every 8th layer (7, 15, 23, 31) is archived; layer j >= 8 reads all of
    it archived before j: history 1 for layers 8..15, 2 for 16..23, 3 for 24..31.  The mix
    template is evaluated once per length (groups mix@1..mix@3, 8 layers each); a group's
    reader sees [B, s, h, d_model], so its mul costs B·s·h·d_model — exactly, per group."""
    a = lib.evaluate(depth_model(lib))
    schedule = [r["template"] for r in rows(a, "layer_schedule")]
    assert schedule == ["plain"] * 8 + ["mix@1"] * 8 + ["mix@2"] * 8 + ["mix@3"] * 8
    con = duckdb.connect()
    con.register("stream_reads", a.tables["stream_reads"])
    distribution = con.execute(
        "select elements, list(layer order by layer), any_value(template) from stream_reads "
        "where stream = 'history' group by elements order by elements"
    ).fetchall()
    assert distribution == [(h, list(range(8 * h, 8 * h + 8)), f"mix@{h}") for h in (1, 2, 3)]
    for h in (1, 2, 3):
        assert shape(a, f"decoder/mix@{h}/depth_w") == ["B", "s", str(h), "d_model"]
        assert shape(a, f"decoder/mix@{h}/depth_sum") == ["B", "s", "d_model"]
        assert counts(a)[f"decoder/mix@{h}/depth_w"] == 8
        (mul,) = rows(a, "terms", uid=f"decoder/mix@{h}/depth_w", phase="prefill", quantity="flops")
        assert (mul["coef"], mul["e_B"], mul["e_s"]) == (h * D_MODEL, 1, 1)
    archived = collections.defaultdict(set)
    for e in rows(a, "edges", stream="history", phase="prefill"):
        archived[e["dst_uid"]].add(e["src_uid"])
    assert archived["decoder/mix@3/depth_w"] == {"decoder/plain/ffn_residual", "decoder/mix@1/out", "decoder/mix@2/out"}
    (row,) = rows(a, "streams", stream="history")
    assert row["layers"] == [7, 15, 23, 31] and row["read"] == "all"


# --------------------------------------------------------------------------- bad input


def test_stream_with_no_producer(lib):
    stack = CLA_STACK.replace("from: self_attn.k_rope,", "from: self_attn.k_ropee,")
    model = cla_model(lib, stack)
    text = model.read_text()
    exc = lib.reject(model)
    issue = located(exc, model, line_of(text, "k_ropee"), "$.stacks.decoder.streams.shared_k.from")
    assert "stream 'shared_k' has no producer" in issue.message
    assert issue.hint == "did you mean 'self_attn.k_rope'?"


def test_stream_with_no_reader(lib):
    stack = edit(
        LLAMA_STACK,
        "    streams: { hidden: { carries: true } }",
        """    streams:
      hidden: { carries: true }
      keys: { from: self_attn.k_rope, src: "`k = self.k_proj(x)`" }""",
    )
    model = lib.model("NoReader", edit(LLAMA, LLAMA_STACK, stack))
    exc = lib.reject(model)
    issue = located(exc, model, line_of(model.read_text(), "keys: {"), "$.stacks.decoder.streams.keys.from")
    assert issue.message == "stream 'keys' has no reader"
    assert "reads: [keys]" in issue.hint


def test_reader_before_any_producer(lib):
    """Layer 0 reuses keys no earlier layer produced: the schedule starts with a reader."""
    stack = CLA_STACK.replace('layers: "0::2" }', 'layers: "1::2" }').replace(
        '{ template: reuse, layers: "1::2" }', '{ template: reuse, layers: "0::2" }'
    )
    model = cla_model(lib, stack)
    exc = lib.reject(model)
    issue = located(exc, model, line_of(model.read_text(), "shared_k: {"), "$.stacks.decoder.streams.shared_k.from")
    assert "layer 0 (template 'reuse') of stack 'decoder' reads stream 'shared_k' before any layer produces it" in (
        issue.message
    )
    assert "first producer: layer 1" in issue.message
    assert "LATER layer" in issue.hint


def test_read_each_with_more_readers_than_elements(lib):
    model = deep_model(lib, TWO_STACKS.replace("after: [0, 1, 2]", "after: [0, 1]"))
    exc = lib.reject(model)
    issue = located(exc, model, line_of(model.read_text(), "read: each"), "$.stacks.encoder.streams.deepstack.read")
    assert "is read by 3 layer(s) but archives 2 element(s)" in issue.message
    assert issue.expected == "2 reading layer(s), the j-th reading the j-th element"
    assert "read: all | concat" in issue.hint


def test_slice_of_a_stack_is_an_append_stream(lib):
    text = edit(LLAMA, "{ op: rmsnorm, in: decoder,", '{ op: rmsnorm, in: "decoder[3]",')
    model = lib.model("Sliced", text)
    exc = lib.reject(model)
    issue = located(exc, model, line_of(text, "decoder[3]"), "$.graph.norm")
    assert "a slice of a stack reads only the last layer; use an append stream with `after: [3]`" in issue.message
    assert "in: decoder.layer_out" in issue.hint


def test_unknown_stream_key(lib):
    stack = CLA_STACK.replace("shared_k: { from:", "shared_k: { form:")
    model = cla_model(lib, stack)
    exc = lib.reject(model)
    issue = located(exc, model, line_of(model.read_text(), "form:"), "$.stacks.decoder.streams.shared_k.form")
    assert issue.message == "unknown stream field 'form'"
    assert issue.hint == "did you mean 'from'?"


def test_carries_declared_twice(lib):
    stack = CLA_STACK.replace(
        "      hidden: { carries: true }\n", "      hidden: { carries: true }\n      residual: { carries: true }\n"
    )
    model = cla_model(lib, stack)
    exc = lib.reject(model)
    issue = located(exc, model, line_of(model.read_text(), "residual: {"), "$.stacks.decoder.streams.residual.carries")
    assert "second carried stream 'residual' (the first is 'hidden')" in issue.message
    assert "ONE carried stream with an extra axis" in issue.hint


def test_read_without_after_is_not_an_append_stream(lib):
    stack = CLA_STACK.replace("shared_k: { from: self_attn.k_rope,", "shared_k: { from: self_attn.k_rope, read: all,")
    model = cla_model(lib, stack)
    exc = lib.reject(model)
    located(exc, model, line_of(model.read_text(), "read: all"), "$.stacks.decoder.streams.shared_k.read")
    assert "'read:' belongs to an append stream" in str(exc) and "after: [i, …]" in str(exc)


def test_unknown_read_mode(lib):
    model = deep_model(lib, TWO_STACKS.replace("read: each", "read: eahc"))
    exc = lib.reject(model)
    issue = located(exc, model, line_of(model.read_text(), "read: eahc"), "$.stacks.encoder.streams.deepstack.read")
    assert issue.hint == "did you mean 'each'?"


@pytest.mark.parametrize(
    ("src", "message"),
    [
        (None, "needs 'src:'"),
        ('src: "reuses the previous keys"', "src must quote the forward source in back-quotes"),
    ],
)
def test_stream_src_is_required_and_quotes_the_source(lib, src, message):
    old = ' src: "a reusing layer attends the keys of the layer before: `key_states = kv_cache[kv_layer][0]`" }'
    stack = CLA_STACK.replace(old, " }" if src is None else f" {src} }}")
    model = cla_model(lib, stack)
    exc = lib.reject(model)
    path = "$.stacks.decoder.streams.shared_k" + ("" if src is None else ".src")
    issue = located(exc, model, line_of(model.read_text(), "shared_k: {"), path)
    assert message in issue.message and "`topk_indices = prev_topk_indices`" in issue.hint


def test_component_reads_an_undeclared_stream(lib):
    model = cla_model(lib, CLA_STACK.replace("shared_v: {", "shared_val: {"))
    comp = lib.components / "gqa_attention_cla.yaml"
    exc = lib.reject(model)
    issue = located(exc, comp, line_of(comp.read_text(), "reads:"), "$.reads")
    assert "reads unknown stream 'shared_v'" in issue.message
    assert issue.hint.startswith("did you mean 'shared_val'?")


def test_node_declaring_a_stream_gets_the_spelling(lib):
    comp_text = edit(
        GQA, "  k_rope:  { op: rope, in: k_heads }", "  k_rope:  { op: rope, in: k_heads, stream_out: keys }"
    )
    comp = lib.component("gqa_attention", comp_text)
    exc = lib.reject(lib.model("StreamOut", LLAMA))
    issue = located(exc, comp, line_of(comp_text, "stream_out"), "$.graph.k_rope.stream_out")
    assert "streams: { NAME: { from: <slot.node path>" in issue.hint and "reads: [NAME]" in issue.hint


def test_before_archives_only_the_carried_stream(lib):
    model = deep_model(lib, TWO_STACKS.replace("after: [1, 3]", "before: [1, 3]"))
    exc = lib.reject(model)
    issue = located(
        exc, model, line_of(model.read_text(), "before: [1, 3]"), "$.stacks.encoder.streams.features.before"
    )
    assert "archives node 'mlp.down_proj' at layer entry" in issue.message
    assert "after: [i, …]" in issue.hint


def test_internal_stream_of_the_carried_stream(lib):
    stack = CLA_STACK.replace("from: self_attn.k_rope,", "from: hidden,")
    model = cla_model(lib, stack)
    exc = lib.reject(model)
    issue = located(exc, model, line_of(model.read_text(), "shared_k: {"), "$.stacks.decoder.streams.shared_k.from")
    assert "reads the carried stream 'hidden'" in issue.message and "after: [i, …]" in issue.hint


def test_read_all_before_anything_is_archived(lib):
    model = depth_model(
        lib, DEPTH_STACK.replace('layers: "0:8" }', 'layers: "0:4" }').replace('layers: "8:" }', 'layers: "4:" }')
    )
    exc = lib.reject(model)
    issue = located(
        exc, model, line_of(model.read_text(), "after: { every: 8 }"), "$.stacks.decoder.streams.history.after"
    )
    assert (
        "layer 4 (template 'mix') of stack 'decoder' reads stream 'history' (read: all) before anything is archived"
        in (issue.message)
    )


def test_archived_layer_out_of_range(lib):
    model = deep_model(lib, TWO_STACKS.replace("after: [1, 3]", "after: [1, 4]"))
    exc = lib.reject(model)
    issue = located(exc, model, line_of(model.read_text(), "after: [1, 4]"), "$.stacks.encoder.streams.features.after")
    assert "layer 4, outside 0..3 of stack 'encoder'" in issue.message


def test_carried_stream_read_by_name(lib):
    comp_text = edit(BLOCK, "inputs: [x]", "inputs: [x]\nreads: [hidden]")
    comp = lib.component("pre_norm_block", comp_text)
    exc = lib.reject(lib.model("ReadsHidden", LLAMA))
    issue = located(exc, comp, line_of(comp_text, "reads:"), "$.reads")
    assert "reads the carried stream 'hidden'" in issue.message


def test_spec_error_type():
    """Stream rejections are spec errors (the CLI prints them without a traceback)."""
    assert issubclass(SpecError, ArchsqlError)
