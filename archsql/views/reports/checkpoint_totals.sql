-- Per checkpoint: how many tensors matched, mismatched, are missing or unclaimed, and the
-- bytes the spec expects against the bytes the files hold (a final checksum only).
with

rows as (
    select * from checkpoint_reconciliation
),

totals as (
    select
        checkpoint,
        any_value(model) as model,
        any_value(profile) as profile,
        count(file_name) as file_tensors,
        count(spec_name) as spec_tensors,
        count(*) filter (where status = 'ok') as matched,
        count(*) filter (where status = 'mismatch') as mismatched,
        count(*) filter (where status = 'missing') as missing,
        count(*) filter (where status = 'unclaimed') as unclaimed,
        coalesce(sum(expected_bytes), 0)::bigint as expected_bytes,
        coalesce(sum(actual_bytes), 0)::bigint as actual_bytes
    from rows
    group by checkpoint
)

select
    checkpoint,
    model,
    profile,
    file_tensors,
    spec_tensors,
    matched,
    mismatched,
    missing,
    unclaimed,
    expected_bytes,
    actual_bytes,
    actual_bytes - expected_bytes as bytes_diff,
    mismatched = 0 and missing = 0 and unclaimed = 0 and actual_bytes = expected_bytes as reconciled
from totals
