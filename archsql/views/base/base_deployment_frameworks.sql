-- The serving framework of each deployment (parameter table).
select
    deployment,
    framework
from deployment_frameworks
