-- max_degree(): the physical bound of a GPU count or a parallel degree, 2^20.  A deployment
-- row beyond it is named by deployment_row_checks, and int_deployment_axes leaves such a
-- degree out where degrees enter the views (no view divides by it or overflows on it).
create or replace macro max_degree() as
1048576;
