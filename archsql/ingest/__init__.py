"""Facts in: Hugging Face config.json files (``hf_config``).

Checkpoint headers (safetensors/GGUF) and measured kernel rows arrive here too, as the
checkpoint-reconciliation and kernel-corpus work lands.
"""
