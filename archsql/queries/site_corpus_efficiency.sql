-- Measured efficiency against the roofline per kernel: the share of the roofline time each measurement reaches (its largest utilization: MFU, MBU or link use), over its measurements.
with
rows_ as (
    select
        gpu,
        op_kind,
        library,
        library_version,
        kernel,
        -- the roofline time is the largest of work / peak per resource, so roofline / measured
        -- time is the largest utilization
        greatest(coalesce(mfu, 0), coalesce(mbu, 0), coalesce(link_util, 0)) as roofline_fraction
    from kernel_measurements
    where coalesce(mfu, mbu, link_util) is not null
)

select
    gpu,
    op_kind,
    library,
    library_version,
    kernel,
    count(*) as measurements,
    min(roofline_fraction) as lowest,
    median(roofline_fraction) as median,
    max(roofline_fraction) as highest
from rows_
group by gpu, op_kind, library, library_version, kernel
order by gpu, op_kind, library, library_version, kernel
