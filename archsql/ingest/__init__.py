"""Facts in: what checkpoints and configs say, read without loading weights.

- ``hf_config``: a Hugging Face ``config.json`` (located errors).
- ``checkpoint``: :func:`read_checkpoint` — tensor headers of a checkpoint as the
  ``checkpoint_tensors`` table, from a ``.safetensors`` file, a shard set
  (``model.safetensors.index.json``), a Hugging Face cache folder or repo id (offline), the
  Hub (range requests through huggingface_hub, never weight bytes), or a ``.gguf`` file.
- ``safetensors_headers``, ``gguf_headers``, ``hub``: the readers behind it.

Measured kernel rows arrive here too with the kernel corpus.
"""

__all__ = ["read_checkpoint"]


def __getattr__(name: str):
    # read_checkpoint pulls in huggingface_hub: imported on first use, so that the leaf
    # ``ingest.tables`` (the checkpoint table schemas) stays cheap to import
    if name == "read_checkpoint":
        from archsql.ingest.checkpoint import read_checkpoint

        return read_checkpoint
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
