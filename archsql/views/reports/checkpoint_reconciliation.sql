-- Tensor by tensor, what the spec expects against what a checkpoint stores: matched by the
-- canonical name on both sides; unclaimed file tensors and spec tensors missing from the file
-- are rows too.
with

mapping as (
    select * from base_checkpoints
),

expected as (
    select
        m.checkpoint,
        s.*
    from int_spec_tensors as s
    join mapping as m on m.model = s.model and m.profile = s.profile
),

actual as (
    select * from int_file_tensors
),

joined as (
    select
        coalesce(e.checkpoint, a.checkpoint) as checkpoint,
        coalesce(e.canonical_name, a.canonical_name) as canonical_name,
        e.spec_name,
        a.name as file_name,
        a.file,
        e.uid,
        e.tensor,
        e.part,
        e.scheme,
        e.rule,
        e.dtype as expected_dtype,
        a.dtype as actual_dtype,
        e.shape as expected_shape,
        a.shape as actual_shape,
        e.elements as expected_elements,
        a.elements as actual_elements,
        e.bytes as expected_bytes,
        a.bytes as actual_bytes
    from expected as e
    full join actual as a on a.checkpoint = e.checkpoint and a.canonical_name = e.canonical_name
),

with_model as (
    select
        m.model,
        m.profile,
        j.*
    from joined as j
    left join mapping as m on m.checkpoint = j.checkpoint
),

checked as (
    select
        *,
        case
            when spec_name is null then 'unclaimed'
            when file_name is null then 'missing'
            when expected_dtype = actual_dtype and expected_shape = actual_shape then 'ok'
            else 'mismatch'
        end as status,
        expected_dtype = actual_dtype as dtype_ok,
        expected_shape = actual_shape as shape_ok,
        expected_elements = actual_elements as elements_ok,
        coalesce(actual_bytes, 0) - coalesce(expected_bytes, 0) as bytes_diff
    from with_model
)

select
    checkpoint,
    model,
    profile,
    canonical_name,
    status,
    spec_name,
    file_name,
    file,
    uid,
    tensor,
    part,
    scheme,
    rule,
    expected_dtype,
    actual_dtype,
    dtype_ok,
    expected_shape,
    actual_shape,
    shape_ok,
    expected_elements,
    actual_elements,
    elements_ok,
    expected_bytes,
    actual_bytes,
    bytes_diff
from checked
