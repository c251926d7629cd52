-- Every whole-model term evaluated at every workload of its phase (per-device terms are
-- evaluated in int_device_op_values); reports sum the values at the grain they need.
with

workloads as (
    select
        workload,
        phase,
        batch,
        new_tokens,
        context
    from base_workloads
),

images as (
    select
        workload,
        image_patches
    from base_workload_images
),

terms as (
    select *
    from int_model_terms
)

-- a term (its grouping and monomial columns, t.* but coef) with its value at each workload
select
    t.model,
    w.*,
    t.* exclude (model, phase, coef),
    t.coef * term_value(
        t.e_B, t.e_s, t.e_c, t.factor, t.factor_arg, w.batch, w.new_tokens, w.context,
        v := coalesce(i.image_patches, 0)
    ) as value
from terms as t
inner join workloads as w on w.phase = t.phase
left join images as i on i.workload = w.workload
