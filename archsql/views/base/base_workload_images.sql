-- The images workloads bring (parameter table): image patches per request.
select
    workload,
    image_patches
from workload_images
