-- The images workloads bring (parameter table): image patches per request.
-- The rows of workloads parameter_checks leaves out are left out with them.
select
    workload,
    image_patches
from workload_images as t
where not exists (
    select 1 from workload_checks as x where x.name = t.workload
)
