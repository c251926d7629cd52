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
    select
        model,
        phase,
        quantity,
        role,
        template,
        kind,
        growth,
        e_B,
        e_s,
        e_c,
        factor,
        factor_arg,
        coef
    from int_model_terms
),

term_values as (
    select
        t.model,
        w.workload,
        w.phase,
        w.batch,
        w.new_tokens,
        w.context,
        t.quantity,
        t.role,
        t.template,
        t.kind,
        t.growth,
        t.e_B,
        t.e_s,
        t.e_c,
        t.factor,
        t.factor_arg,
        t.coef * term_value(
            t.e_B, t.e_s, t.e_c, t.factor, t.factor_arg, w.batch, w.new_tokens, w.context,
            v := coalesce(i.image_patches, 0)
        ) as value
    from terms as t
    inner join workloads as w on w.phase = t.phase
    left join images as i on i.workload = w.workload
)

select
    model,
    workload,
    phase,
    batch,
    new_tokens,
    context,
    quantity,
    role,
    template,
    kind,
    growth,
    e_B,
    e_s,
    e_c,
    factor,
    factor_arg,
    value
from term_values
