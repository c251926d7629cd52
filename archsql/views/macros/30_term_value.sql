-- term_value(e_B, e_s, e_c, factor, arg, b, s, c): the value of one term row's monomial at a
-- workload (batch b, new tokens s, context c), in DOUBLE: b^e_B · s^e_s · c^e_c · factor.
-- Multiply by the row's coefficient(s).  The one definition of how a term is evaluated.
create or replace macro term_value(e_B, e_s, e_c, factor, arg, b, s, c) as
power(b, e_B) * power(s, e_s) * power(c, e_c) * term_factor(factor, arg, s, c)::double;
