"""Designing on specs: compare components, edit models, diff graphs, audit candidates.

Every number comes from the one evaluation path — specs are evaluated by
:func:`archsql.evaluator.evaluate`, written to a design store with the store's own views,
and read back with SQL (``archsql/design/sql``):

- :mod:`archsql.design.compare` — several components for one slot under one contract
  (d_model, batch, contexts, GPU, dtype), each as a one-layer probe model; the
  ``component_comparison`` view.
- :mod:`archsql.design.edit` — swap components in chosen layer groups and set dims; the
  edit is saved as a derived model (``extends:`` + overrides) and every layer group's
  params, weight bytes, prefill FLOPs, KV and SOL are reported old → new.
- :mod:`archsql.design.diff` — two components or two models, nodes paired by declaration
  path; changed attributes and one-sided paths.
- :mod:`archsql.design.audit` — the architecture audit card: profiles, the single-variable
  check, ledgers, the evidence still required and a decision.
"""

from __future__ import annotations

import archsql.evaluator  # noqa: F401  (registers the primitive ops that spec checks read)
