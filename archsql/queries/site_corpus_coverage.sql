-- Kernel corpus coverage: measurements per op kind × GPU × library (all versions), with the versions and kernels they span.
select
    op_kind,
    family,
    gpu,
    library,
    count(*) as measurements,
    count(distinct library_version) as versions,
    string_agg(distinct library_version, ', ' order by library_version) as library_versions,
    count(distinct kernel) as kernels
from kernel_measurements
group by op_kind, family, gpu, library
order by op_kind, gpu, library
