-- The degree of each parallel axis of each deployment (parameter table).
select
    deployment,
    axis,
    degree
from deployment_mesh
