"""Measured kernels: workload signatures, validated append-only rows, NVIDIA's
aiconfigurator database as the first real corpus.

One row per measurement (:mod:`~archsql.kernel_corpus.schema`): provenance, the full
workload signature — op kind, the shape fields that kind uses (per device), dtypes, GPU,
phase, parallel setting, library and version, kernel — the time in microseconds, optional
power, and the reference-check status.  FLOPs, bytes and implied MFU/MBU are views
(``int_kernel_corpus_work``, ``kernel_measurements``) over SQL macros, the same ones the
importer checks rows with.

Modules:

=================  =====================================================================
``schema``         the Arrow schemas: ``kernel_corpus`` rows, ``kernel_corpus_sources``,
                   ``kernel_corpus_rejects``
``registry``       op kinds (family, required fields, contract), dtype spellings, phases
``storage``        the corpus folder (append-only Parquet partitions) and its view in the
                   store, ``sync``
``ingest``         :class:`CorpusWriter`: the one validated, idempotent ingest path
``files``          CSV / Parquet measurement files
``aiconfigurator`` NVIDIA aiconfigurator-core's ``systems/data`` tables
``harness``        eager references, output checks, timing: ``archsql bench``
``providers``      the kernel libraries the harness measures (PyTorch eager, FlashInfer,
                   flash-attn, DeepGEMM): availability, versions, kernels
``plan``           the unique kernel shapes one device of a deployment runs in a step
                   (the ``kernel_plan`` view)
``measured``       ``measured_vs_sol`` / ``step_measured`` of a model × deployment, names checked
``cli``            ``archsql corpus import | summary | sync | vs-sol`` and ``archsql bench``
=================  =====================================================================

Joining a deployment's ops with measurements (the view ``measured_vs_sol``) is an exact join
of ``kernel_signatures`` (per-device shapes read through the layouts) with the corpus on
``gpu``, ``op_kind`` and the op kind's signature fields (``OpKind.signature``, e.g. GEMM
``dtype, weight_dtype, m, n, k``); ``step_measured`` sums it per step (docs/kernel_corpus.md).
"""

from archsql import api
from archsql.kernel_corpus.aiconfigurator import import_aiconfigurator
from archsql.kernel_corpus.files import import_files
from archsql.kernel_corpus.ingest import CorpusWriter, IngestReport, Source
from archsql.kernel_corpus.storage import corpus_dir, open_corpus, point_view, sync

# the kernel_corpus view reads its Parquet partitions: read-only queries admit that folder,
# and read it where it is now (a store moved or copied with its corpus folder)
api.register_readable_dir(corpus_dir)
api.register_query_hook(point_view)

__all__ = [
    "CorpusWriter",
    "IngestReport",
    "Source",
    "corpus_dir",
    "import_aiconfigurator",
    "import_files",
    "open_corpus",
    "sync",
]
