"""Spec authoring (issue 17): facts bundle, guards with codes and locations, the prompt, the
agent loop, promote.

Ground truth: the catalog's config snapshots (the same files as /work/shared/data/configs) and
the meta-device inventories of tests/fixtures/meta_inventories (transformers' own tensor names
and shapes).  The draft specs below are written here by hand, as an agent would write them;
each mutation is one deliberate mistake that one guard must catch with its code and location.

The checkpoint guard (a scratch DuckDB store) is the costly one: one :class:`Reconciler` is
shared by the module, so each spec is written into a store once.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from archsql.author import facts as facts_mod
from archsql.author.guards import CODES, Reconciler, check
from archsql.author.loop import AuthorError, Budget, CommandAgent, ScriptedAgent, author, promote
from archsql.author.prompt import assemble, similar_models
from archsql.cli import cli
from archsql.specs import CONFIGS_DIR, default_library
from tests.conftest import FIXTURES

INVENTORIES = FIXTURES / "meta_inventories"

# ------------------------------------------------------------------ hand-written draft specs

DENSE = """\
model: {name}
config: config.json
dims:
  d_model: config.hidden_size
  n_layers: config.num_hidden_layers
  n_heads: config.num_attention_heads
  n_kv_heads: config.num_key_value_heads
  d_head: {d_head}
  d_ff: config.intermediate_size
  vocab: config.vocab_size
  max_context: config.max_position_embeddings
  window: {window}
  qkv_bias: {bias}
  o_bias: {bias}
  mlp_bias: 0
  tie_embeddings: config.tie_word_embeddings
components: {{ block: pre_norm_block, attention: {attention}, ffn: swiglu_mlp }}
templates:
  dense: {{}}
stacks:
  decoder:
    repeat: n_layers
    path: model.layers
    streams: {{ hidden: {{ carries: true }} }}
    schedule: {schedule}
inputs: [input_ids]
graph:
  embed_tokens: {{ op: embedding, in: input_ids, path: model.embed_tokens, dims: {{ vocab: vocab, d_model: d_model }} }}
  decoder:      {{ stack: decoder, in: embed_tokens }}
  norm:         {{ op: rmsnorm, in: decoder, path: model.norm, dims: {{ d: d_model }} }}
  lm_head:      {{ op: lm_head, in: norm, dims: {{ d_model: d_model, vocab: vocab, tied: tie_embeddings }} }}
outputs: [lm_head]
{tail}"""

QWEN = dict(
    name="Qwen3-0.6B-authored",
    d_head="config.head_dim",
    window='"config.sliding_window if config.use_sliding_window else 0"',
    bias="config.attention_bias",
    attention="gqa_attention_qk_norm",
    schedule="dense",
    tail="config_unused:\n  max_window_layers: sliding windows are off (use_sliding_window is false)\n",
)
MISTRAL = dict(
    name="Mistral-7B-authored",
    d_head="config.hidden_size // config.num_attention_heads",
    window="config.sliding_window",
    bias="0",
    attention="gqa_attention",
    schedule="dense",
    tail="",
)


def spec(base: dict, **changes) -> str:
    return DENSE.format(**{**base, **changes})


# ------------------------------------------------------------------ fixtures


def _bundle(root: Path, config_file: str, *, drop: str | None = None, transform=None) -> facts_mod.Facts:
    src = root / "src"
    src.mkdir(parents=True)
    shutil.copyfile(CONFIGS_DIR / config_file, src / "config.json")
    inventory = INVENTORIES / f"{config_file.removesuffix('.json')}.json.gz"
    if drop or transform:  # a checkpoint that lacks one tensor; an inventory corrected
        with gzip.open(inventory) as f:
            data = json.load(f)
        data["checkpoint_tensors"] = [t for t in data["checkpoint_tensors"] if t["name"] != drop]
        if transform:
            data["checkpoint_tensors"] = transform(data)
        inventory = root / "inventory.json.gz"
        inventory.write_bytes(gzip.compress(json.dumps(data).encode()))
    return facts_mod.gather(src, root / "facts", meta_inventory=inventory)


@pytest.fixture(scope="module")
def reconciler(tmp_path_factory):
    return Reconciler(tmp_path_factory.mktemp("stores"))


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    return _bundle(tmp_path_factory.mktemp("qwen"), "Qwen__Qwen3-0.6B.json")


@pytest.fixture(scope="module")
def mistral(tmp_path_factory):
    return _bundle(tmp_path_factory.mktemp("mistral"), "mistralai__Mistral-7B-Instruct-v0.1.json")


def _draft(folder: Path, facts, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(facts.config_path, folder / "config.json")
    (folder / "draft.yaml").write_text(text, encoding="utf-8")
    return folder / "draft.yaml"


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


# ------------------------------------------------------------------ facts bundle


def test_facts_bundle_keeps_sources_with_provenance(qwen):
    with gzip.open(INVENTORIES / "Qwen__Qwen3-0.6B.json.gz") as f:
        inv = json.load(f)
    assert qwen.tensors.num_rows == inv["num_checkpoint_tensors"] == 310
    assert pc.sum(pc.list_value_length(qwen.tensors["shape"])).as_py() > 0
    elements = sum(int(n) for n in _elements(qwen.tensors))
    assert elements == inv["num_checkpoint_elements"]
    prov = json.loads((qwen.folder / "provenance.json").read_text())
    assert set(prov["files"]) == {"config.json", "meta_inventory.json.gz"}
    import hashlib

    assert (
        prov["files"]["config.json"]["sha256"]
        == hashlib.sha256((CONFIGS_DIR / "Qwen__Qwen3-0.6B.json").read_bytes()).hexdigest()
    )
    assert "meta inventory" in prov["tensors"]["how"]
    again = facts_mod.load(qwen.folder)
    assert again.config == json.loads((CONFIGS_DIR / "Qwen__Qwen3-0.6B.json").read_text())
    assert pq.read_table(qwen.folder / "tensors.parquet").equals(qwen.tensors)


def _elements(table):
    from math import prod

    return [prod(s) for s in table.column("shape").to_pylist()]


def test_facts_bundle_reads_safetensors_headers(tmp_path):
    """A checkpoint folder: config.json, the real all-MiniLM-L6-v2 safetensors header as a
    sparse file (104 tensors), a modeling file and generation_config.json — every one kept."""
    from tests.test_ingest_headers import write_header
    from tests.test_reconciliation import minilm_header

    src = tmp_path / "src"
    src.mkdir()
    shutil.copyfile(CONFIGS_DIR / "sentence-transformers__all-MiniLM-L6-v2.json", src / "config.json")
    (src / "generation_config.json").write_text('{"max_length": 128}')
    (src / "modeling_bert.py").write_text("class BertModel: pass\n")
    header = minilm_header()
    write_header(src / "model.safetensors", header)
    facts = facts_mod.gather(src, tmp_path / "facts")
    names = sorted(k for k in header if k != "__metadata__")
    assert sorted(facts.tensors.column("name").to_pylist()) == names and len(names) == 104
    assert facts.extra == {"generation_config.json": {"max_length": 128}}
    assert facts.source_dir == tmp_path / "facts" / "source"
    assert facts.provenance["tensors"]["how"].startswith("checkpoint headers")
    assert set(facts.provenance["files"]) == {"config.json", "generation_config.json", "source/modeling_bert.py"}


def test_facts_errors_are_located(tmp_path):
    with pytest.raises(facts_mod.FactsError, match=r"no config\.json") as exc:
        facts_mod.gather(tmp_path, tmp_path / "out")
    assert exc.value.issues[0].file == str(tmp_path)
    with pytest.raises(facts_mod.FactsError, match="not a facts bundle"):
        facts_mod.load(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "inv.json").write_text('{"tensors": []}')
    with pytest.raises(facts_mod.FactsError, match="checkpoint_tensors"):
        facts_mod.gather(tmp_path, tmp_path / "out", meta_inventory=tmp_path / "inv.json")


# ------------------------------------------------------------------ guards: mutations


def test_dropped_layer_is_a_structure_error(qwen, tmp_path):
    text = spec(QWEN, schedule='[{ template: dense, layers: "0:27" }]')
    report = check(_draft(tmp_path, qwen, text), qwen)
    assert report.codes() == ["A201"]
    e = report.errors[0]
    assert e.guard == "structure" and "does not cover layers 27" in e.message
    assert e.location.startswith(f"{tmp_path / 'draft.yaml'}:{_line_of(text, 'schedule:')}")
    assert "$.stacks.decoder.schedule" in e.location
    assert report.status["checkpoint"].startswith("skipped")


def test_dangling_node_is_a_structure_error(qwen, tmp_path):
    """A norm nothing reads: A204 at its line; its 1024 (hidden_size) weights are parameters
    the inventory does not have, so params says so too."""
    text = spec(QWEN).replace(
        "outputs: [lm_head]",
        "  extra_norm:   { op: rmsnorm, in: decoder, path: model.extra_norm, dims: { d: d_model } }\noutputs: [lm_head]",
    )
    report = check(_draft(tmp_path, qwen, text), qwen)
    assert report.codes() == ["A204", "A401"]
    e = report.errors[0]
    assert e.location.startswith(f"{tmp_path / 'draft.yaml'}:{_line_of(text, 'extra_norm:')}")
    assert "'extra_norm' is read by no node" in e.message
    assert "model.extra_norm.weight +1,024" in report.errors[1].hint


def test_ignored_sliding_window_is_caught_by_coverage_and_structure(mistral, tmp_path):
    report = check(_draft(tmp_path, mistral, spec(MISTRAL, window="0")), mistral)
    assert sorted(report.codes()) == ["A203", "A301"]
    by = {e.code: e for e in report.errors}
    assert by["A301"].location == f"{mistral.config_path.parent.parent / 'src' / 'config.json'} $.sliding_window" or (
        by["A301"].location.endswith("config.json $.sliding_window")
    )
    assert "sliding_window" in by["A301"].message
    # structure: the config's window (4096, hand-read from config.json) caps no layer
    assert by["A203"].location == f"{mistral.config_path} $.sliding_window"
    assert "sliding_window = 4096" in by["A203"].message


def test_wrong_window_value_is_a_structure_error(mistral, tmp_path):
    report = check(_draft(tmp_path, mistral, spec(MISTRAL, window="config.sliding_window // 2")), mistral)
    assert report.codes() == ["A203"]
    assert report.errors[0].expected == "4096" and report.errors[0].got == "2048"


def test_windows_swapped_against_layer_types_is_a_structure_error(tmp_path):
    """gpt-oss-20b alternates sliding_attention and full_attention (config.layer_types); a
    schedule mapping them the other way round caps exactly the wrong layers."""
    src = tmp_path / "src"
    src.mkdir()
    shutil.copyfile(CONFIGS_DIR / "openai__gpt-oss-20b.json", src / "config.json")
    facts = facts_mod.gather(src, tmp_path / "facts")  # config only: no tensors, no inventory
    text = default_library().model_path("gpt-oss-20b").read_text()
    text = text.replace("config: openai__gpt-oss-20b.json", "config: config.json")
    assert check(_draft(tmp_path / "right", facts, text), facts).errors == []
    swapped = text.replace(
        "map: { sliding_attention: sliding, full_attention: full }",
        "map: { sliding_attention: full, full_attention: sliding }",
    )
    assert swapped != text
    report = check(_draft(tmp_path / "wrong", facts, swapped), facts)
    assert report.codes() == ["A203"]
    e = report.errors[0]
    types = facts.config["layer_types"]
    sliding = [i for i, t in enumerate(types) if t == "sliding_attention"]
    assert e.location == f"{facts.config_path} $.layer_types"
    assert e.expected == f"{len(sliding)} sliding layers"
    assert e.got.startswith(f"{len(types) - len(sliding)} capped; not capped: {', '.join(map(str, sliding[:12]))}")


def test_wrong_src_anchor_is_a_source_error(tmp_path):
    """GLM-5.2's topk stream quotes its forward source; the facts bundle keeps the modeling
    file of the checkpoint folder (here the stand-in of tests/test_source_guard.py), and an
    anchor that is not in it is A601 on the draft's src: line."""
    from tests.test_source_guard import FORWARD, NAME

    src = tmp_path / "src"
    src.mkdir()
    shutil.copyfile(CONFIGS_DIR / "zai-org__GLM-5.2.json", src / "config.json")
    (src / NAME).write_text(FORWARD)
    facts = facts_mod.gather(src, tmp_path / "facts")
    assert facts.source_dir == tmp_path / "facts" / "source"
    text = default_library().model_path("GLM-5.2").read_text()
    text = text.replace("config: zai-org__GLM-5.2.json", "config: config.json")
    wrong = text.replace("`topk_indices = prev_topk_indices`", "`topk_indices = previous_topk`")
    assert wrong != text
    report = check(_draft(tmp_path, facts, wrong), facts)
    assert report.codes() == ["A601"]  # every other guard passed
    assert report.errors[0].location.startswith(f"{tmp_path / 'draft.yaml'}:{_line_of(wrong, 'src:')}")
    assert "topk_indices = previous_topk" in report.errors[0].message


def test_unknown_component_is_a_schema_error(qwen, tmp_path):
    text = spec(QWEN, attention="gqa_atention_qk_norm")
    report = check(_draft(tmp_path, qwen, text), qwen)
    assert report.codes() == ["A101"]
    assert "gqa_attention_qk_norm" in (report.errors[0].hint or "")
    assert report.errors[0].location.startswith(f"{tmp_path / 'draft.yaml'}:{_line_of(text, 'components:')}")


def test_another_config_is_a_schema_error(qwen, tmp_path):
    text = spec(QWEN).replace("config: config.json", "config: Qwen__Qwen3-8B.json")
    report = check(_draft(tmp_path, qwen, text), qwen)
    assert "A103" in report.codes()


@pytest.fixture(scope="module")
def deepseek(tmp_path_factory):
    """DeepSeek-V2-Lite: its config snapshot (an MLC preset) drops q_lora_rank, so transformers
    built a query LoRA the real checkpoint does not have; the inventory is corrected as
    tests/test_inventory_params.py derives it (one q_proj per layer)."""
    from tests.test_inventory_params import _without_query_lora

    config = json.loads((CONFIGS_DIR / "deepseek-ai__DeepSeek-V2-Lite.json").read_text())

    def correct(data):
        return _without_query_lora({**data, "config": config}, data["checkpoint_tensors"])

    facts = _bundle(tmp_path_factory.mktemp("dsv2"), "deepseek-ai__DeepSeek-V2-Lite.json", transform=correct)
    facts.tensors = None  # the params guard alone (the inventory's dtypes are build dtypes, float32 here)
    return facts


def test_wrong_kv_lora_rank_is_a_params_error(deepseek, tmp_path):
    lib = default_library()
    text = lib.model_path("DeepSeek-V2-Lite").read_text()
    text = text.replace("config: deepseek-ai__DeepSeek-V2-Lite.json", "config: config.json")
    right = check(_draft(tmp_path / "right", deepseek, text), deepseek)
    assert right.errors == [] and right.status["params"] == "passed"
    assert right.status["checkpoint"].startswith("not applicable")
    wrong = text.replace("d_kv_lora: config.kv_lora_rank", "d_kv_lora: config.kv_lora_rank // 2")
    report = check(_draft(tmp_path / "wrong", deepseek, wrong), deepseek)
    assert report.codes() == ["A401"]
    e = report.errors[0]
    assert e.location == f"{tmp_path / 'wrong' / 'draft.yaml'} $.dims"
    # the latent projections are where it differs: kv_a_proj_with_mqa [kv_lora + rope, d] per layer
    cfg = deepseek.config
    per_layer = (cfg["kv_lora_rank"] // 2) * cfg["hidden_size"]
    assert f"model.layers.*.self_attn.kv_a_proj_with_mqa.weight {-per_layer * cfg['num_hidden_layers']:+,}" in e.hint
    # the right number read from another key (qk_rope_head_dim · 8 = 512 = kv_lora_rank) leaves
    # kv_lora_rank unread: coverage says so
    assert cfg["qk_rope_head_dim"] * 8 == cfg["kv_lora_rank"]
    other = text.replace("d_kv_lora: config.kv_lora_rank", "d_kv_lora: config.qk_rope_head_dim * 8")
    report = check(_draft(tmp_path / "other", deepseek, other), deepseek)
    assert report.codes() == ["A301"] and report.errors[0].location.endswith("config.json $.kv_lora_rank")


def test_missing_tensor_is_a_checkpoint_error(qwen_run, tmp_path, reconciler):
    """The converged draft against a checkpoint that lacks one tensor (model.norm.weight,
    hidden_size = 1024 elements): params and, run anyway, the checkpoint guard locate it."""
    facts = _bundle(tmp_path, "Qwen__Qwen3-0.6B.json", drop="model.norm.weight")
    draft = qwen_run.out / "scratch" / "draft.yaml"
    assert check(draft, facts, reconciler=reconciler).codes() == ["A401"]
    report = check(draft, facts, reconciler=reconciler, full=True)
    by = {e.code: e for e in report.errors}
    assert sorted(by) == ["A401", "A502", "A506"]
    assert by["A502"].location == f"{draft} norm: model.norm.weight"
    assert int(by["A401"].got.replace(",", "")) - int(by["A401"].expected.replace(",", "")) == 1024
    assert by["A506"].expected.replace(",", "").split()[0] != by["A506"].got.replace(",", "").split()[0]


def test_extra_and_transposed_tensors_are_checkpoint_errors(qwen_run, tmp_path, reconciler):
    """The converged draft against a checkpoint with one tensor no module has and layer 0's
    o_proj stored transposed ([1024, 2048] → [2048, 1024], same element count): A501 on the
    extra tensor, A505 on the transposed one (run with full=True: params sees the extra one)."""

    def mutate(data):
        out = []
        for t in data["checkpoint_tensors"]:
            if t["name"] == "model.layers.0.self_attn.o_proj.weight":
                t = {**t, "shape": t["shape"][::-1]}
            out.append(t)
        return [*out, {"name": "model.extra.weight", "shape": [8], "dtype": "bfloat16"}]

    facts = _bundle(tmp_path, "Qwen__Qwen3-0.6B.json", transform=mutate)
    draft = qwen_run.out / "scratch" / "draft.yaml"
    report = check(draft, facts, reconciler=reconciler, full=True)
    by = {e.code: e for e in report.errors}
    assert sorted(by) == ["A401", "A501", "A505", "A506"]
    assert by["A501"].location.endswith("model.safetensors: model.extra.weight")
    assert by["A505"].location.endswith("model.layers.0.self_attn.o_proj.weight")
    assert (by["A505"].expected, by["A505"].got) == ("[1024, 2048]", "[2048, 1024]")


def test_every_code_belongs_to_a_guard():
    from archsql.author.guards import GUARDS

    assert {g for g, _ in CODES.values()} == set(GUARDS)


# ------------------------------------------------------------------ prompt


def test_prompt_is_deterministic_and_built_from_data(qwen):
    lib = default_library()
    first, second = assemble(qwen, lib), assemble(qwen, lib)
    assert first == second
    names = [n for n, _ in similar_models(qwen.config, lib)]
    assert 3 <= len(names) <= 5 and "Qwen3-0.6B" not in names and "Qwen3-8B" in names
    for name in names:
        assert f"### {name} " in first
    # an example that extends another shows its parent too (Qwen3-8B extends Meta-Llama-3.1-8B)
    assert "Meta-Llama-3.1-8B.yaml (extended):\n```yaml\nmodel: Meta-Llama-3.1-8B" in first
    assert "- linear: " in first and "- gqa_attention_qk_norm [attention]" in first
    assert "A301 [coverage]" in first and '"num_hidden_layers": 28' in first
    assert "   28 × model.layers.*.self_attn.q_norm.weight BF16 [128]" in first


# ------------------------------------------------------------------ the loop, end to end


@pytest.fixture(scope="module")
def qwen_run(qwen, tmp_path_factory, reconciler):
    """The loop on Qwen3-0.6B from an empty draft: three wrong attempts, then the right spec."""
    replies = [
        spec(QWEN, attention="gqa_atention_qk_norm"),  # A101: a typo
        spec(QWEN, schedule='[{ template: dense, layers: "0:27" }]'),  # A201: a layer left out
        spec(QWEN, tail=""),  # A301: max_window_layers neither read nor explained
        spec(QWEN),
    ]
    out = tmp_path_factory.mktemp("qwen_run") / "out"
    agent = ScriptedAgent(replies)
    result = author(qwen, out, agent, budget=Budget(turns=6), reconciler=reconciler)
    result.scripted = agent
    return result


def test_loop_converges_from_wrong_attempts_qwen(qwen_run, tmp_path, reconciler):
    result = qwen_run
    out = result.out
    assert result.passed, result.final.errors
    assert [[e["code"] for e in t["errors"]] for t in result.turns] == [["A101"], ["A201"], ["A301"], []]
    assert result.final.status["checkpoint"] == "passed"
    report = json.loads((out / "report.json").read_text())
    assert report["passed"] and report["unresolved"] == [] and len(report["turns"]) == 4
    assert (out / "draft.yaml").read_text() == spec(QWEN)
    md = (out / "report.md").read_text()
    assert "### turn 3: 1 error(s)" in md and "A301" in md
    # the agent was fed each turn's errors
    # each turn after the first was handed the previous turn's errors, codes and locations
    handed = [[(e["code"], e["location"].split(" ")[-1]) for e in seen["errors"]] for seen in result.scripted.seen[1:]]
    assert [[c for c, _ in h] for h in handed] == [["A101"], ["A201"], ["A301"]]
    assert handed[1][0][1] == "$.stacks.decoder.schedule" and handed[2][0][1] == "$.max_window_layers"
    fed = json.loads((out / "scratch" / "feedback.json").read_text())  # the last turn's
    assert fed["turn"] == 4 and fed["errors"] == []
    # promote re-runs every guard, then copies draft + config into the user spec folder
    path = promote(out, tmp_path / "specs", reconciler=reconciler)
    assert path == tmp_path / "specs" / "models" / "Qwen3-0.6B-authored.yaml"
    assert "config: Qwen3-0.6B-authored.config.json" in path.read_text()
    from archsql.api import user_library

    assert "Qwen3-0.6B-authored" in user_library(tmp_path / "specs").catalog()


def test_loop_converges_mistral_and_budget_stops(mistral, tmp_path, reconciler):
    replies = [spec(MISTRAL, window="0"), None, spec(MISTRAL)]
    result = author(mistral, tmp_path / "out", ScriptedAgent(replies), budget=Budget(turns=4), reconciler=reconciler)
    assert result.passed and result.final.status["checkpoint"] == "passed"
    codes = [sorted(e["code"] or "none" for e in t["errors"]) for t in result.turns]
    assert codes == [["A203", "A301"], ["A203", "A301"], []]  # turn 2: nothing new written, the old draft checked again
    assert result.turns[1]["note"] == "the draft did not change"
    stopped = author(mistral, tmp_path / "out2", ScriptedAgent([spec(MISTRAL, window="0")]), budget=Budget(turns=2))
    assert not stopped.passed and stopped.stopped == "turn budget spent (2 turns)"
    assert {e["code"] for e in json.loads((tmp_path / "out2" / "report.json").read_text())["unresolved"]} == {
        "A203",
        "A301",
    }
    with pytest.raises(AuthorError, match="does not pass every guard"):
        promote(tmp_path / "out2", tmp_path / "specs")


def test_review_feeds_back_only_verified_defects(tmp_path):
    """After the guards pass, one review: a defect whose evidence is true goes back to the
    agent (a fix turn, guarded again); one with false evidence and one with none do not.
    Mistral-7B's config (sliding_window 4096, 32 layers, read by hand) without tensors or
    inventory: the checkpoint and params guards are not applicable, the loop stays cheap."""
    src = tmp_path / "src"
    src.mkdir()
    shutil.copyfile(CONFIGS_DIR / "mistralai__Mistral-7B-Instruct-v0.1.json", src / "config.json")
    facts = facts_mod.gather(src, tmp_path / "facts")
    review_text = (
        "cfg:sliding_window=4096\ncfg:sliding_window=8192\nsrc:modeling_mistral.py:window\n"
        "defect: doc should say the window is 4096 :: cfg:sliding_window=4096 :: cfg:num_hidden_layers=32\n"
        "defect: the window should be 8192 :: cfg:sliding_window=8192\n"
        "defect: attention should be MLA\n"
    )
    fixed = spec(MISTRAL).replace(
        "config: config.json", "config: config.json\ndoc: every layer attends a 4096-key window"
    )
    agent = ScriptedAgent([spec(MISTRAL), fixed])
    result = author(facts, tmp_path / "out", agent, budget=Budget(turns=3), reviewer=ScriptedAgent([review_text]))
    assert result.passed and result.stopped == "every guard passed on turn 2"
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    statuses = ["verified", "contradicted", "unverified", "verified", "contradicted", "unverified"]
    assert [c["status"] for c in report["claims"]] == statuses
    # the agent's fix turn was handed the verified defect alone
    assert agent.seen[0] is None
    assert [d["claim"] for d in agent.seen[1]["review_defects"]] == ["defect: doc should say the window is 4096"]
    assert agent.seen[1]["errors"] == []
    review = report["turns"][0]["review"]
    assert [d["claim"] for d in review if d["kind"] == "defect" and d["status"] == "verified"] == [
        "defect: doc should say the window is 4096"
    ]
    assert (tmp_path / "out" / "draft.yaml").read_text() == fixed
    assert "## Review claims" in (tmp_path / "out" / "report.md").read_text()


def test_command_agent_runs_a_template_without_shell(mistral, tmp_path):
    script = tmp_path / "agent.py"
    script.write_text(
        "import sys, pathlib\npathlib.Path(sys.argv[2]).write_text(pathlib.Path(sys.argv[1]).read_text())\n"
    )
    reply = tmp_path / "reply.yaml"
    reply.write_text(spec(MISTRAL, window="0"))
    agent = CommandAgent(f"{sys.executable} {script} {reply} {{draft}}")
    result = author(mistral, tmp_path / "out", agent, budget=Budget(turns=1))
    assert [e["code"] for e in result.turns[0]["errors"]] == ["A203", "A301"] or sorted(
        e["code"] for e in result.turns[0]["errors"]
    ) == ["A203", "A301"]
    with pytest.raises(AuthorError, match="unknown placeholder"):
        CommandAgent("agent {nope}")
    with pytest.raises(AuthorError, match="empty"):
        CommandAgent("  ")
    with pytest.raises(AuthorError, match="agent command not found: no-such-agent-xyz"):
        CommandAgent("no-such-agent-xyz {draft}")


def test_cli_author_and_promote_errors(tmp_path):
    runner = CliRunner()
    src = tmp_path / "src"
    src.mkdir()
    shutil.copyfile(CONFIGS_DIR / "mistralai__Mistral-7B-Instruct-v0.1.json", src / "config.json")
    out = tmp_path / "out"
    r = runner.invoke(cli, ["author", str(src), "--agent", "true", "--budget", "turns=1", "--out", str(out)])
    assert r.exit_code == 1, r.output  # the agent wrote nothing: not passed, a verdict
    assert "turn budget spent" in r.output
    assert "the agent wrote no draft.yaml" in (out / "report.md").read_text() or "no draft" in r.output
    r = runner.invoke(cli, ["author", str(src), "--agent", "true", "--budget", "turns=x"])
    assert r.exit_code == 2 and "'x' is not a number" in r.output
    r = runner.invoke(cli, ["promote", str(tmp_path), "--to", str(tmp_path / "specs")])
    assert r.exit_code == 2 and "not an author output folder" in r.output and "Traceback" not in r.output


# ------------------------------------------------------------------ review with checked evidence


def test_evidence_claims_are_verified_contradicted_or_unverified(qwen, tmp_path):
    """Qwen3-0.6B facts, values read by hand from its config.json and inventory:
    num_hidden_layers 28, head_dim 128, sliding_window null, q_proj [2048, 1024]."""
    from archsql.author.evidence import verify

    (qwen.folder / "source").mkdir(exist_ok=True)
    (qwen.folder / "source" / "modeling_qwen3.py").write_text(
        "class Qwen3Attention(nn.Module):\n    def forward(self, hidden_states):\n"
        "        query_states = self.q_norm(\n            self.q_proj(hidden_states))\n"
    )
    try:
        claims = {
            "cfg:num_hidden_layers=28": "verified",
            "cfg:head_dim=64": "contradicted",
            "cfg:sliding_window=null": "verified",
            "cfg:use_sliding_window=false": "verified",
            "cfg:num_hidden_layers=28.0": "contradicted",  # a float is not the config's int
            "cfg:kv_lora_rank=512": "unverified",  # no such key in a GQA config
            "ckpt:model.layers.0.self_attn.q_proj.weight [2048, 1024]": "verified",
            "ckpt:model.layers.0.self_attn.q_proj.weight [1024, 2048]": "contradicted",
            "ckpt:lm_head.weight [151936, 1024]": "contradicted",  # tied: not in the checkpoint
            "count:model.layers.27.=11": "verified",  # 4 attention + 2 qk norms + 3 mlp + 2 norms
            "count:model.layers.=300": "contradicted",  # 28 × 11 = 308
            "src:modeling_qwen3.py:self.q_norm( self.q_proj(hidden_states))": "verified",
            "src:modeling_qwen3.py:self.k_norm": "contradicted",
            "src:modeling_llama.py:LlamaAttention": "unverified",
            "ckpt:no shape here": "unverified",
            "rumor:the model is good": "unverified",
        }
        results = verify(list(claims), qwen)
        assert {r.claim: r.status for r in results} == claims
        by = {r.claim: r for r in results}
        assert by["cfg:head_dim=64"].evidence == "config.json head_dim = 128"
        assert by["count:model.layers.=300"].evidence == "308 tensors start with 'model.layers.'"
    finally:
        shutil.rmtree(qwen.folder / "source")
    no_tensors = facts_mod.Facts(qwen.folder, qwen.config, {}, None)
    assert [r.status for r in verify(["ckpt:model.norm.weight [1024]", "count:model.=1"], no_tensors)] == [
        "unverified",
        "unverified",
    ]


# ------------------------------------------------------------------ checkpoint codes come from kinds


def _row(status, *, part="data", scheme="none", exp=("BF16", [4, 8]), act=("BF16", [4, 8])):
    """One ``checkpoint_reconciliation`` row (publish_check._COLUMNS order); elements and bytes
    derived here from the shapes (BF16: 2 bytes, U8: 1)."""
    from math import prod

    size = {"BF16": 2, "U8": 1}
    (ed, es), (ad, as_) = exp, act
    return (
        status, "w", "w" if status != "unclaimed" else None, "w" if status != "missing" else None,
        "model.safetensors", "n", "weight", part, scheme, "default",
        ed, ad, es, as_, prod(es), prod(as_), prod(es) * size[ed], prod(as_) * size[ad],
    )  # fmt: skip


def test_checkpoint_codes_come_from_the_finding_kind_not_its_wording():
    """Each kind of reconciliation result, built from hand-written view rows, gets its code from
    its kind: every message is reworded before mapping and the codes stay the same."""
    from dataclasses import replace

    from archsql.author.guards import KIND_CODES, finding_error
    from archsql.publish_check import KINDS, reconciliation_findings

    assert set(KIND_CODES) == set(KINDS)  # a new kind of finding needs a code
    rows = [
        _row("unclaimed"),
        _row("missing"),
        _row("mismatch", act=("U8", [4, 8])),  # dtype only
        _row("mismatch", act=("BF16", [4, 9])),  # unquantized element count
        _row("mismatch", part="scale", scheme="fp8", act=("BF16", [4, 9])),  # a quantized part's count
        _row("mismatch", act=("BF16", [8, 4])),  # the same axes reversed
        _row("mismatch", act=("BF16", [2, 16])),  # same product 32, other lengths
    ]
    findings = reconciliation_findings(rows, (6, 6, 100, 102), "ck", "draft.yaml")
    kinds = ["unclaimed", "missing", "dtype", "elements", "packed_elements", "transposed", "reshaped", "bytes"]
    assert [f.kind for f in findings] == kinds
    reworded = [finding_error(replace(f, message="(reworded)")) for f in findings]
    assert [e.code for e in reworded] == ["A501", "A502", "A503", "A504", "A503", "A505", "A505", "A506"]
    assert all(e.kind == f.kind and e.message == "(reworded)" for e, f in zip(reworded, findings, strict=True))


# ------------------------------------------------------------------ axioms (A7xx)


def _library_with(tmp_path: Path, base: str, name: str, *swaps: tuple[str, str]):
    """The catalog library plus one user component: ``base`` with each (old, new) swapped in
    (every swap must apply), renamed ``name``."""
    from archsql.api import user_library

    text = Path(default_library().component_files[base]).read_text()
    for old, new in ((f"component: {base}", f"component: {name}"), *swaps):
        assert old in text, old
        text = text.replace(old, new)
    folder = tmp_path / "lib"
    (folder / "components").mkdir(parents=True, exist_ok=True)
    (folder / "models").mkdir(exist_ok=True)
    (folder / "components" / f"{name}.yaml").write_text(text)
    return user_library(folder)


@pytest.fixture(scope="module")
def mistral_config_only(tmp_path_factory):
    """Mistral-7B's config alone (sliding_window 4096, 32 layers): no tensors, no inventory,
    so a check is the evaluation plus the cheap guards."""
    root = tmp_path_factory.mktemp("mistral_cfg")
    (root / "src").mkdir()
    shutil.copyfile(CONFIGS_DIR / "mistralai__Mistral-7B-Instruct-v0.1.json", root / "src" / "config.json")
    return facts_mod.gather(root / "src", root / "facts")


def test_axiom_windowed_cache_agrees_with_its_reader(mistral_config_only, tmp_path):
    """gqa_attention caps its K/V caches at the window its attention attends (Mistral: 4096 =
    config.sliding_window).  Uncapped caches under a windowed attention (KV at context 8192
    twice that at 4096) are A701 at the cache entries' lines (the evaluator's walk check,
    tagged axiom:window_cache); capped caches whose readers (scores, attn: window 0) attend
    every position are A701 from the axiom query over the evaluated tables, on both cached
    nodes."""
    facts = mistral_config_only
    cap = "growth: window, window: window"
    lib = _library_with(tmp_path / "a", "gqa_attention", "gqa_attention_leaky", (cap, "growth: per_token"))
    report = check(_draft(tmp_path / "a", facts, spec(MISTRAL, attention="gqa_attention_leaky")), facts, library=lib)
    assert report.codes() == ["A701", "A701"] and report.status["axioms"] == "failed"
    component = tmp_path / "a" / "lib" / "components" / "gqa_attention_leaky.yaml"
    text = component.read_text()
    assert sorted(e.location for e in report.errors) == [
        f"{component}:{_line_of(text, 'node: k_rope')}:7 $.cache.entries[0]",
        f"{component}:{_line_of(text, 'node: v_heads')}:7 $.cache.entries[1]",
    ]
    assert {e.kind for e in report.errors} == {"axiom:window_cache"}
    full = ("d_head: d_head, window: window }", "d_head: d_head, window: 0 }")
    lib = _library_with(tmp_path / "b", "gqa_attention", "gqa_attention_peek", full)
    draft = _draft(tmp_path / "b", facts, spec(MISTRAL, attention="gqa_attention_peek"))
    report = check(draft, facts, library=lib)
    assert report.codes() == ["A701", "A701"]
    by = {e.location: e for e in report.errors}
    assert sorted(by) == [f"{draft} decoder/dense/self_attn.k_rope", f"{draft} decoder/dense/self_attn.v_heads"]
    e = by[f"{draft} decoder/dense/self_attn.k_rope"]
    assert e.got == "cache capped at 4096 (window), decoder/dense/self_attn.scores reads every position"
    assert e.kind == "window_cache_agrees_with_reads" and "component gqa_attention_peek" in e.message


def test_axiom_latent_cache_is_head_free(mistral_config_only, tmp_path):
    """A latent cache is one vector per token for every head: gqa_attention's per-head keys
    ([B, s, n_kv_heads, d_head]) declared kind latent depend on n_kv_heads (axis 2): A702."""
    lib = _library_with(tmp_path, "gqa_attention", "gqa_attention_latent", ("kind: key,", "kind: latent,"))
    draft = _draft(tmp_path, mistral_config_only, spec(MISTRAL, attention="gqa_attention_latent"))
    report = check(draft, mistral_config_only, library=lib)
    assert report.codes() == ["A702"]
    e = report.errors[0]
    assert e.location == f"{draft} decoder/dense/self_attn.k_rope"
    assert e.got == "axis 2 = n_kv_heads (dims: n_kv_heads is a head count)"


def test_axiom_state_cache_is_context_free(tmp_path):
    """mamba-2.8b's SSM state is [B, d_inner, d_state] whatever the context.  Declared growth
    per_token it would grow with every token: A703 at its cache entry (the evaluator's walk
    check of runtime axes, tagged axiom:cache_axes).  Its conv state declared on the per-token
    conv input x_in ([B, s, d_inner], growth per_token) grows with the context too: A703 from
    the axiom query, on x_in."""
    src = tmp_path / "src"
    src.mkdir()
    shutil.copyfile(CONFIGS_DIR / "ArthurZ__mamba-2.8b.json", src / "config.json")
    facts = facts_mod.gather(src, tmp_path / "facts")
    text = default_library().model_path("mamba-2.8b").read_text()
    text = text.replace("config: ArthurZ__mamba-2.8b.json", "config: config.json")
    assert check(_draft(tmp_path / "right", facts, text), facts).errors == []
    grows = ("kind: ssm_state,  growth: state", "kind: ssm_state,  growth: per_token")
    lib = _library_with(tmp_path / "a", "mamba_mixer", "mamba_mixer_grows", grows)
    report = check(
        _draft(tmp_path / "a", facts, text.replace("mixer: mamba_mixer }", "mixer: mamba_mixer_grows }")),
        facts,
        library=lib,
    )
    assert report.codes() == ["A703"] and report.errors[0].kind == "axiom:cache_axes"
    component = tmp_path / "a" / "lib" / "components" / "mamba_mixer_grows.yaml"
    assert (
        report.errors[0].location
        == f"{component}:{_line_of(component.read_text(), 'node: ssm_state')}:7 $.cache.entries[1]"
    )
    inputs = ("node: conv_state, kind: conv_state, growth: state", "node: x_in, kind: conv_state, growth: per_token")
    lib = _library_with(tmp_path / "b", "mamba_mixer", "mamba_mixer_inputs", inputs)
    draft = _draft(tmp_path / "b", facts, text.replace("mixer: mamba_mixer }", "mixer: mamba_mixer_inputs }"))
    report = check(draft, facts, library=lib)
    assert report.codes() == ["A703"]
    e = report.errors[0]
    assert e.location == f"{draft} decoder/mamba/mixer.x_in" and e.kind == "state_cache_context_free"
    assert e.got.startswith("kind conv_state with growth per_token; the cached node has a sequence axis (axis 1)")


def test_axiom_active_experts_within_total(deepseek, tmp_path):
    """DeepSeek-V2-Lite routes 6 of 64 experts (config, read by hand); top_k bound to 6 × 20 =
    120 > 64 gives more active copies than experts: A704 on each routed expert weight node."""
    text = default_library().model_path("DeepSeek-V2-Lite").read_text()
    text = text.replace("config: deepseek-ai__DeepSeek-V2-Lite.json", "config: config.json")
    wrong = text.replace("top_k: config.num_experts_per_tok", "top_k: config.num_experts_per_tok * 20")
    assert wrong != text
    draft = _draft(tmp_path, deepseek, wrong)
    report = check(draft, deepseek)
    assert set(report.codes()) == {"A704"}
    assert {e.location.rsplit(" ", 1)[1] for e in report.errors} >= {
        "decoder/moe/mlp.gate_proj",
        "decoder/moe/mlp.down_proj",
    }
    # 26 MoE layers × 64 experts = 1664 copies; 26 × 120 = 3120 active
    gate = next(e for e in report.errors if e.location.endswith("decoder/moe/mlp.gate_proj"))
    assert (gate.expected, gate.got) == ("active copies <= 1664 (every expert of every layer)", "3120 active copies")


def test_gqa_heads_not_divisible_is_a_shape_error(mistral_config_only, tmp_path):
    """32 query heads in 5 key/value groups: the attention_score shape rule rejects it at
    evaluation (A102), located in the component — no axiom query needed."""
    text = spec(MISTRAL).replace("n_kv_heads: config.num_key_value_heads", "n_kv_heads: config.num_key_value_heads - 3")
    report = check(_draft(tmp_path, mistral_config_only, text), mistral_config_only)
    assert set(report.codes()) == {"A102"}
    assert any("query heads must be a multiple of key/value heads" in e.message for e in report.errors)


def test_catalog_breaks_no_axiom(catalog_db):
    """Every catalog model keeps every axiom: the queries over the catalog store's own tables."""
    import duckdb

    from archsql.author.guards import axiom_violations, axioms

    assert [a.code for a in axioms()] == ["A701", "A702", "A703", "A704"]
    con = duckdb.connect(str(catalog_db), read_only=True)
    try:
        assert axiom_violations(con) == []
    finally:
        con.close()


# ------------------------------------------------------------------ omitted parts


OMITTED = """\
omitted:
  vision_tower:
    tensors: ["model.visual.*"]
    reason: the vision encoder is not modelled (text decoding only)
"""
VISION = [  # a stand-in vision tower: 64 × 32 + 64 = 2,112 parameters, BF16: 4,224 bytes
    {"name": "model.visual.patch_embed.proj.weight", "shape": [64, 32], "dtype": "bfloat16"},
    {"name": "model.visual.patch_embed.proj.bias", "shape": [64], "dtype": "bfloat16"},
]


@pytest.fixture(scope="module")
def qwen_vision(tmp_path_factory):
    """Qwen3-0.6B's inventory with a vision tower the spec does not model."""
    return _bundle(
        tmp_path_factory.mktemp("qwen_vision"),
        "Qwen__Qwen3-0.6B.json",
        transform=lambda d: [*d["checkpoint_tensors"], *VISION],
    )


def test_omitted_part_is_compared_apart(qwen_vision, tmp_path, reconciler):
    """Without omitted: the 2,112 vision parameters are an A401 difference.  Declared omitted:
    params and checkpoint compare the language model alone (both pass) and the report counts
    the part apart: 2 tensors, 2,112 parameters, 4,224 bytes."""
    facts = qwen_vision
    report = check(_draft(tmp_path / "without", facts, spec(QWEN)), facts)
    assert report.codes() == ["A401"]
    assert int(report.errors[0].got.replace(",", "")) - int(report.errors[0].expected.replace(",", "")) == -2112
    report = check(
        _draft(tmp_path / "with", facts, spec(QWEN, tail=QWEN["tail"] + OMITTED)), facts, reconciler=reconciler
    )
    assert report.errors == [] and report.passed
    assert report.status["params"] == report.status["checkpoint"] == "passed"
    assert report.omitted == [
        {
            "part": "vision_tower",
            "reason": "the vision encoder is not modelled (text decoding only)",
            "inventory_tensors": 2,
            "inventory_params": 2112,
            "checkpoint_tensors": 2,
            "checkpoint_bytes": 4224,
        }
    ]
    # the loop's report says so too
    out = tmp_path / "out"
    with_omitted = spec(QWEN, tail=QWEN["tail"] + OMITTED)
    result = author(facts, out, ScriptedAgent([with_omitted]), budget=Budget(turns=1), reconciler=reconciler)
    assert result.passed and json.loads((out / "report.json").read_text())["omitted"] == report.omitted
    assert (
        "- vision_tower: the vision encoder is not modelled (text decoding only) (inventory tensors 2, "
        in (out / "report.md").read_text()
    )


def test_validate_compares_the_modelled_part_too(qwen_vision, tmp_path, monkeypatch):
    """`archsql validate` honours omitted: too: the reconciliation (replaced here by a stand-in
    that keeps what it is handed: the real one runs in test_omitted_part_is_compared_apart) gets
    the checkpoint without the 2 vision tensors, which a warning names (4,224 bytes); against a
    checkpoint without the part, a warning and no error (a text-only export)."""
    from archsql import publish_check

    handed = []
    monkeypatch.setattr(publish_check, "reconcile", lambda tables, table, **kw: handed.append(table) or [])
    draft = _draft(tmp_path, qwen_vision, spec(QWEN, tail=QWEN["tail"] + OMITTED))
    noticed = []
    assert publish_check.validate(draft, qwen_vision.tensors, warnings=noticed) == []
    names = handed[0].column("name").to_pylist()
    assert len(names) == qwen_vision.tensors.num_rows - 2 and not any(n.startswith("model.visual.") for n in names)
    [note] = [i for i in noticed if "omitted part" in i.message]
    assert "vision_tower" in note.message and "2 checkpoint tensors, 4,224 bytes" in note.message
    assert note.path == "$.omitted.vision_tower" and note.line == _line_of(draft.read_text(), "vision_tower:")
    noticed = []
    assert publish_check.validate(draft, handed[0], warnings=noticed) == []
    assert any("matches no checkpoint tensor" in i.message for i in noticed)


def test_omitted_part_errors_are_located(qwen_vision, tmp_path, reconciler):
    """A part whose patterns match nothing (A402 in params, A508 in the checkpoint guard), a part
    covering a tensor the spec models (A205), and a malformed block (A101), each at its line."""
    facts = qwen_vision
    nothing = spec(QWEN, tail=QWEN["tail"] + OMITTED.replace("model.visual.*", "model.vision_tower.*"))
    report = check(_draft(tmp_path / "nothing", facts, nothing), facts, full=True, reconciler=reconciler)
    line = _line_of(nothing, "vision_tower:")
    assert {e.code for e in report.errors} >= {"A402", "A508"}
    for e in report.errors:
        if e.code in ("A402", "A508"):
            assert e.location == f"{tmp_path / 'nothing' / 'draft.yaml'}:{line}:3 $.omitted.vision_tower"
    covers = spec(QWEN, tail=QWEN["tail"] + OMITTED.replace('"model.visual.*"', '"model.visual.*", "model.norm.*"'))
    report = check(_draft(tmp_path / "covers", facts, covers), facts)
    # A205, and params then miss the norm's 1,024 (hidden_size) weights on the inventory side
    assert report.codes() == ["A205", "A401"]
    assert "covers 1 tensor(s) the spec models (model.norm.weight)" in report.errors[0].message
    assert "model.norm.weight +1,024" in report.errors[1].hint
    bad = spec(QWEN, tail=QWEN["tail"] + OMITTED.replace("    reason:", "    tensor: [x]\n    why:"))
    report = check(_draft(tmp_path / "bad", facts, bad), facts)
    assert set(report.codes()) == {"A101"}
    paths = sorted(e.location.split(" ")[-1] for e in report.errors)
    assert paths == ["$.omitted.vision_tower.reason", "$.omitted.vision_tower.tensor", "$.omitted.vision_tower.why"]


# ------------------------------------------------------------------ facts from a Hub repo id (no network)

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _fake_hub_cache(root: Path, repo: str, files: dict[str, bytes | dict]) -> Path:
    """The Hugging Face cache layout (models--org--name/refs/main → snapshots/<commit>/…), as
    huggingface_hub's own cache lookups read it; a dict value is a safetensors header."""
    from tests.test_ingest_headers import write_header

    repo_dir = root / f"models--{repo.replace('/', '--')}"
    snapshot = repo_dir / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    (repo_dir / "refs").mkdir()
    (repo_dir / "refs" / "main").write_text(COMMIT)
    for name, content in files.items():
        if isinstance(content, dict):
            write_header(snapshot / name, content)
        else:
            (snapshot / name).write_bytes(content)
    return root


def _minilm_files(**extra) -> dict:
    from tests.test_reconciliation import minilm_header

    config = json.loads((CONFIGS_DIR / "sentence-transformers__all-MiniLM-L6-v2.json").read_text())
    config["auto_map"] = {"AutoModel": "modeling_tiny.TinyModel", "AutoConfig": "other/repo--configuration_x.XConfig"}
    return {"config.json": json.dumps(config).encode(), "generation_config.json": b'{"max_length": 128}',
            "modeling_tiny.py": b"class TinyModel: pass\n", "model.safetensors": minilm_header(), **extra}  # fmt: skip


def test_facts_from_a_hub_repo_id_read_the_cache_offline(tmp_path):
    """A repo in the HF cache, offline: config, generation config, the remote-code file its
    auto_map names (the other-repo reference is left out) and the 104 header tensors of the
    real all-MiniLM-L6-v2 header — no network call is possible (offline)."""
    cache = _fake_hub_cache(tmp_path / "hub", "org/tiny", _minilm_files())
    facts = facts_mod.gather_hub("org/tiny", tmp_path / "facts", offline=True, cache_dir=cache)
    assert facts.tensors.num_rows == 104
    assert facts.extra == {"generation_config.json": {"max_length": 128}}
    assert [p.name for p in facts.source_dir.glob("*.py")] == ["modeling_tiny.py"]
    prov = facts.provenance
    assert prov["source"] == "hub:org/tiny@main"
    assert prov["tensors"]["how"].startswith("safetensors headers of the HF cache snapshot")
    assert prov["files"]["config.json"]["from"].startswith("hub:org/tiny@main/config.json (")
    # configs cached without headers: facts without a tensor inventory, and the provenance says why
    cache = _fake_hub_cache(tmp_path / "hub2", "org/tiny", {"config.json": _minilm_files()["config.json"]})
    facts = facts_mod.gather_hub("org/tiny", tmp_path / "facts2", offline=True, cache_dir=cache)
    assert facts.tensors is None and facts.provenance["tensors_missing"]


def test_hub_repo_without_cache_or_network_is_a_clear_error(tmp_path, monkeypatch):
    """Offline and not cached: a located error naming the cache and how to fill it.  Online
    without a network (hf_hub_download fails as huggingface_hub does with no connection): an
    error naming the repo and the offline way.  The CLI prints either without a traceback."""
    import huggingface_hub
    from huggingface_hub import errors as hf_errors

    cache = tmp_path / "hub"
    cache.mkdir()
    with pytest.raises(
        facts_mod.FactsError, match=r"no config\.json of org/none in the local Hugging Face cache"
    ) as exc:
        facts_mod.gather_hub("org/none", tmp_path / "f1", offline=True, cache_dir=cache)
    assert exc.value.issues[0].file == str(cache) and "hf download org/none config.json" in exc.value.issues[0].hint

    def no_network(*args, **kwargs):
        raise hf_errors.LocalEntryNotFoundError("Cannot reach the Hub and the file is not in the local cache")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", no_network)
    with pytest.raises(facts_mod.FactsError, match=r"cannot fetch config\.json of org/none from the Hub") as exc:
        facts_mod.gather_hub("org/none", tmp_path / "f2", cache_dir=cache)
    assert "--offline" in exc.value.issues[0].hint
    with pytest.raises(facts_mod.FactsError, match="neither a local folder nor a Hub repo id"):
        facts_mod.gather_hub("not a repo", tmp_path / "f3", offline=True, cache_dir=cache)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    r = CliRunner().invoke(cli, ["author", "org/none", "--offline", "--agent", "true", "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "no config.json of org/none" in r.output and "Traceback" not in r.output


def test_catalog_omitted_parts_are_the_parts_the_inventory_tests_exclude():
    """The catalog's omitted: blocks name exactly the tensor prefixes tests/test_inventory_params.py
    excludes (NOT_MODELED, each with the construct that is missing), and no other model omits a part."""
    from archsql.schema.spec import parse_model
    from tests.test_inventory_params import NOT_MODELED

    lib = default_library()
    declared = {}
    for name in lib.catalog():
        spec, _ = parse_model(lib.model_path(name))
        patterns = {p for part in spec.omitted.values() for p in part.tensors}
        if patterns:
            declared[name] = patterns
    assert declared == {model: {f"{prefix}*" for prefix in parts} for model, parts in NOT_MODELED.items()}


def test_params_leave_out_what_the_inventory_ignores_on_load_and_the_omitted_part(tmp_path):
    """Qwen3.5-27B: its meta inventory holds the vision tower (333 model.visual.* tensors, counted
    from the inventory) and lacks the MTP layer transformers drops on load (ignored_on_load
    '^mtp.*').  The catalog spec omits the vision tower and models the MTP layer: params compare
    the language model alone and pass; the MTP parameters the spec leaves out are exactly the
    difference A401 reports when the inventory does not say it ignores them."""
    config_file = "Qwen__Qwen3.5-27B.json"
    with gzip.open(INVENTORIES / config_file.replace(".json", ".json.gz")) as f:
        inventory = json.load(f)
    assert inventory["ignored_on_load"] == ["^mtp.*"]
    visual = [t for t in inventory["checkpoint_tensors"] if t["name"].startswith("model.visual.")]
    facts = _bundle(tmp_path / "right", config_file)
    facts.tensors = None  # the params guard alone (the inventory's dtypes are build dtypes)
    text = (
        default_library().model_path("Qwen3.5-27B").read_text().replace(f"config: {config_file}", "config: config.json")
    )
    report = check(_draft(tmp_path / "right", facts, text), facts)
    assert report.errors == [] and report.status["params"] == "passed"
    parts = {r["part"]: r for r in report.omitted}
    assert parts["vision_tower"]["inventory_tensors"] == len(visual) == 333
    mtp = parts["ignored_on_load"]["spec_params"]
    assert mtp > 0 and parts["ignored_on_load"]["patterns"] == ["^mtp.*"]
    assert parts["ignored_on_load"]["inventory_params"] == 0  # the inventory holds no mtp.* tensor

    def unsaid(data):  # the same inventory, not saying what it ignores
        data.pop("ignored_on_load")
        return data["checkpoint_tensors"]

    facts = _bundle(tmp_path / "unsaid", config_file, transform=unsaid)
    facts.tensors = None
    report = check(_draft(tmp_path / "unsaid", facts, text), facts)
    assert report.codes() == ["A401"]
    assert int(report.errors[0].got.replace(",", "")) - int(report.errors[0].expected.replace(",", "")) == mtp


class _Tensor:
    """A stand-in for a meta-device tensor: a shape and a dtype, no data."""

    def __init__(self, *shape, dtype="torch.bfloat16"):
        self.shape, self.dtype = shape, dtype


class _TinyModule:
    """A stand-in for a transformers model on the meta device: an embedding tied to the head."""

    _keys_to_ignore_on_load_unexpected = [r"model\.mtp.*"]

    def __init__(self):
        embed = _Tensor(100, 16)
        self._state = {"model.embed_tokens.weight": embed, "model.norm.weight": _Tensor(16), "lm_head.weight": embed}

    def state_dict(self, keep_vars=False):
        return self._state


def test_meta_inventory_built_on_the_fly_and_its_absence(tmp_path, monkeypatch):
    """With a builder (the stand-in of a model made on the meta device): every state_dict entry
    is a tensor, the tied head is not saved twice, the class's ignore patterns are kept.
    Without transformers: a clear error that says what to install or give instead."""
    src = tmp_path / "src"
    src.mkdir()
    shutil.copyfile(CONFIGS_DIR / "Qwen__Qwen3-0.6B.json", src / "config.json")
    inv = facts_mod.build_meta_inventory(src, builder=lambda folder: _TinyModule())
    assert [t["name"] for t in inv["tensors"]] == ["model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"]
    assert [t["name"] for t in inv["checkpoint_tensors"]] == ["model.embed_tokens.weight", "model.norm.weight"]
    assert inv["tied_weights"] == {"lm_head.weight": "model.embed_tokens.weight"}
    assert inv["checkpoint_tensors"][0] == {
        "name": "model.embed_tokens.weight",
        "shape": [100, 16],
        "dtype": "bfloat16",
    }
    assert inv["ignored_on_load"] == [r"model\.mtp.*"]
    monkeypatch.setitem(sys.modules, "transformers", None)  # as if not installed
    with pytest.raises(facts_mod.FactsError, match="needs torch and transformers") as exc:
        facts_mod.gather(src, tmp_path / "facts", build_inventory=True)
    assert "--inventory" in exc.value.issues[0].hint


def test_facts_from_the_hub_through_metadata_calls(tmp_path, monkeypatch):
    """Online, an empty cache: the small files come through hf_hub_download and the headers
    through HfApi.get_safetensors_metadata (both replaced at the huggingface_hub boundary by
    stand-ins serving the MiniLM config and two of its real tensors); no weight is asked for."""
    import huggingface_hub
    from huggingface_hub import errors as hf_errors

    from archsql.ingest import hub

    served = {"config.json": _minilm_files()["config.json"], "modeling_tiny.py": b"class TinyModel: pass\n"}
    asked = []

    def download(repo_id, filename, revision=None, cache_dir=None, **kw):
        asked.append(filename)
        if filename not in served:
            raise hf_errors.EntryNotFoundError(f"{filename} not in {repo_id}")
        (tmp_path / "dl").mkdir(exist_ok=True)
        (tmp_path / "dl" / filename).write_bytes(served[filename])
        return str(tmp_path / "dl" / filename)

    from types import SimpleNamespace as NS

    tensors = {  # two tensors of the real all-MiniLM-L6-v2 header (F32)
        "embeddings.word_embeddings.weight": NS(dtype="F32", shape=[30522, 384], data_offsets=(0, 46881792)),
        "embeddings.LayerNorm.weight": NS(dtype="F32", shape=[384], data_offsets=(46881792, 46883328)),
    }
    meta = NS(files_metadata={"model.safetensors": NS(tensors=tensors)}, sharded=False, weight_map=None)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    monkeypatch.setattr(hub.HfApi, "get_safetensors_metadata", lambda self, repo_id, revision=None: meta)
    cache = tmp_path / "hub"
    cache.mkdir()
    facts = facts_mod.gather_hub("org/tiny", tmp_path / "facts", cache_dir=cache)
    assert sorted(asked) == ["config.json", "generation_config.json", "hf_quant_config.json", "modeling_tiny.py"]
    assert sorted(facts.tensors.column("name").to_pylist()) == sorted(tensors)
    assert facts.provenance["tensors"]["how"].startswith("safetensors headers by HfApi.get_safetensors_metadata")
    assert facts.provenance["tensors"]["from"] == "hub:org/tiny@main"
