-- term_value(e_B, e_s, e_c, factor, arg, b, s, c, v := 0): the value of one term row's
-- monomial at a workload (batch b, new tokens s, context c, image patches v per request), in
-- DOUBLE: b^e_B · s^e_s · c^e_c · factor (the factor 'patches' is v^arg).
-- Multiply by the row's coefficient(s).  The one definition of how a term is evaluated.
create or replace macro term_value(e_B, e_s, e_c, factor, arg, b, s, c, v := 0) as
power(b, e_B) * power(s, e_s) * power(c, e_c) * term_factor(factor, arg, s, c, v := v)::double;
