"""Measured kernels: workload signatures, validated append-only rows, measured next to SOL.

Lands with the kernel-corpus issue; nothing in the store reads measurements yet.
"""
