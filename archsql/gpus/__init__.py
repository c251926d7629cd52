"""The GPU table (memory, bandwidth, peak rates per dtype, links).

Its source, ``shared/data/gpus.csv`` with per-row sources and disagreement flags, becomes
the ``gpus`` parameter table with the deployment/speed-of-light work (issue: deployments).
Nothing in the store reads GPUs yet.
"""
