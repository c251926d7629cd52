-- Every whole-model term evaluated at every workload of its phase (per-device terms are
-- evaluated in int_device_op_values); reports sum the values at the grain they need.
with

workloads as (
    select *
    from int_workload_inputs
),

terms as (
    select *
    from int_model_terms
)

-- a term (its grouping and monomial columns, t.* but coef) with its value at each workload
select
    t.model,
    w.* exclude (image_patches),
    t.* exclude (model, phase, coef),
    t.coef * term_value(
        t.e_B, t.e_s, t.e_c, t.factor, t.factor_arg, w.batch, w.new_tokens, w.context,
        v := w.image_patches
    ) as value
from terms as t
inner join workloads as w on w.phase = t.phase
