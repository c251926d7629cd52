-- The unit every node op's FLOPs run on (reference table, written from Primitive.math_class
-- and the communication ops on every build).
select
    op,
    math_class
from op_math
