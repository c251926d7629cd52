-- Every workload with the image patches it brings per request (0 for a text-only workload):
-- the inputs at which terms are evaluated (term_value's batch, new_tokens, context and v).
with

workloads as (
    select *
    from base_workloads
),

images as (
    select
        workload,
        image_patches
    from base_workload_images
)

select
    w.workload,
    w.phase,
    w.batch,
    w.new_tokens,
    w.context,
    coalesce(i.image_patches, 0) as image_patches
from workloads as w
left join images as i on i.workload = w.workload
