-- Per-instance quantities as sums of terms coef * B^e_B * s^e_s * c^e_c * factor(factor_arg).
select
    model,
    phase,
    uid,
    quantity,
    coef,
    e_B,
    e_s,
    e_c,
    factor,
    factor_arg,
    port
from terms
