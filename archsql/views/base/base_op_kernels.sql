-- The measured op kind of the kernel each node op launches (reference table, written from
-- Primitive.kernel_kind and the collectives' COLLECTIVE_KERNEL_KINDS on every build).
select
    op,
    op_kind,
    attention_stage
from op_kernels
