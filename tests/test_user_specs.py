"""Adding a model from a plain install: a user spec folder (`archsql build --specs DIR`), a
`config:` path relative to the spec file, and the config keys a spec does not read reported
as warnings naming the key and the file."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from archsql import api
from archsql.cli import cli
from archsql.errors import SpecError
from archsql.evaluator import evaluate
from archsql.ingest.hf_config import ConfigReads, unread_keys

# a real Mistral-7B-Instruct-v0.1 config.json (sliding_window 4096, 32 layers, 8 KV heads of 128)
MISTRAL_CONFIG = Path(__file__).parents[1] / "archsql/specs/configs/mistralai__Mistral-7B-Instruct-v0.1.json"
SHARED_MISTRAL = Path("/work/shared/data/configs/mistralai__Mistral-7B-Instruct-v0.1.json")

# Llama's graph with Mistral's config: Llama's spec binds no window and reads attention_bias
# and mlp_bias, which Mistral's config does not have, so those three are bound to numbers
SPEC = """\
model: my-mistral
extends: Meta-Llama-3.1-8B
hf_id: mistralai/Mistral-7B-Instruct-v0.1
config: config.json
dims:
  qkv_bias: 0
  o_bias: 0
  mlp_bias: 0
"""


def _folder(tmp_path: Path, spec: str = SPEC) -> Path:
    folder = tmp_path / "my-specs"
    folder.mkdir()
    config = SHARED_MISTRAL if SHARED_MISTRAL.is_file() else MISTRAL_CONFIG
    shutil.copy(config, folder / "config.json")
    (folder / "my-mistral.yaml").write_text(spec)
    return folder


def test_config_reads_records_what_is_looked_up():
    config = ConfigReads({"a": 1, "b": {"c": 2, "d": 3}, "e": None, "f": [], "torch_dtype": "bfloat16"})
    assert config["a"] == 1 and config.get("b")["c"] == 2 and "zz" not in config
    # b was read, but only b.c of it; e (null) and f (empty) state nothing; torch_dtype is ignored
    assert unread_keys(config, ignored={"torch_dtype"}) == ["b.d"]
    assert unread_keys(config, also_read={"b.d"}, ignored={"torch_dtype"}) == []
    list(config.items())  # a reader that walks the object reads every key of it
    assert "torch_dtype" in config.reads


def test_a_spec_that_ignores_sliding_window_is_warned(tmp_path):
    """The Llama graph bound to Mistral's config without a window: every cache would be
    counted uncapped, so the unread `sliding_window` is named, with the file it is in."""
    folder = _folder(tmp_path)
    analysis = evaluate(folder / "my-mistral.yaml")
    (warning,) = analysis.warnings
    assert warning.message == "config key 'sliding_window' is not read by the spec my-mistral.yaml"
    assert warning.file == str(folder / "config.json") and warning.path == "$.sliding_window"
    assert "bind it in the spec's dims or schedule" in warning.hint
    # the same spec reading it (as the catalog's Mistral does) is not warned, and its caches are capped
    fixed = SPEC.replace("dims:\n", "dims:\n  window: config.sliding_window or 0\n")
    (folder / "my-mistral.yaml").write_text(fixed)
    assert evaluate(folder / "my-mistral.yaml").warnings == []
    # or it says why it does not bind it
    (folder / "my-mistral.yaml").write_text(SPEC + "config_unused:\n  sliding_window: the window is not modeled here\n")
    assert evaluate(folder / "my-mistral.yaml").warnings == []
    (folder / "my-mistral.yaml").write_text(SPEC + "config_unused:\n  sliding_window: ''\n")
    with pytest.raises(SpecError, match="say why the spec does not bind config key 'sliding_window'"):
        evaluate(folder / "my-mistral.yaml")


def test_the_catalog_reads_or_acknowledges_every_config_key():
    """No catalog model leaves a config key unread without a reason (config_keys.yaml lists
    the keys outside the architecture; each spec's config_unused says why it binds no other)."""
    unread = {m: [w.message for w in evaluate(m).warnings] for m in api.catalog()}
    assert {m: w for m, w in unread.items() if w} == {}


def test_build_specs_folder_from_the_cli(tmp_path, monkeypatch):
    """`archsql build --specs DIR` builds every model of DIR, reads config: beside the spec,
    names the unread key on stderr, and the KV figure it gives is the uncapped one the warning
    is about: 32 layers × 2 (K, V) × 8 heads × 128 × 2 bytes = 131072 bytes for every token,
    where the window would stop the growth at 4096 tokens."""
    monkeypatch.chdir(tmp_path)
    folder = _folder(tmp_path)
    db = tmp_path / "user.duckdb"
    result = CliRunner().invoke(cli, ["--db", str(db), "build", "--specs", str(folder), "--format", "csv"])
    assert result.exit_code == 0, result.output
    assert "my-mistral" in result.stdout
    assert "config key 'sliding_window' is not read by the spec my-mistral.yaml" in result.stderr
    assert str(folder / "config.json") in result.stderr
    con = duckdb.connect(str(db), read_only=True)
    (per_token,) = con.execute(
        "select bytes_per_token from kv_per_token where model = 'my-mistral' and dtype = 'bf16'"
    ).fetchone()
    con.close()
    assert per_token == 32 * 2 * 8 * 128 * 2 == 131072
    # a name not in the folder: did-you-mean over the folder's models and the catalog
    bad = CliRunner().invoke(cli, ["--db", str(db), "build", "my-mistrall", "--specs", str(folder)])
    assert bad.exit_code == 2 and "did you mean 'my-mistral'?" in bad.output
    missing = CliRunner().invoke(cli, ["--db", str(db), "build", "--specs", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "spec folder" in missing.output and "does not exist" in missing.output


def test_config_path_relative_to_the_spec_and_its_error(tmp_path):
    folder = _folder(tmp_path, SPEC.replace("config: config.json", "config: configs/config.json"))
    with pytest.raises(SpecError) as exc:
        evaluate(folder / "my-mistral.yaml")
    message = str(exc.value)
    assert f"config file not found: neither {folder / 'configs/config.json'} (beside the spec)" in message
    assert "my-mistral.yaml:4" in message  # located at the spec's config: line
    (folder / "configs").mkdir()
    shutil.move(folder / "config.json", folder / "configs" / "config.json")
    assert evaluate(folder / "my-mistral.yaml").model == "my-mistral"
