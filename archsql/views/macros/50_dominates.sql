-- dominates(qx, qy, px, py): point q beats point p on two axes where higher is better — at
-- least as good on both and better on one.  A Pareto frontier is the points no other point
-- dominates (archsql.sweep.pareto for `archsql sweep --pareto`, and the saved query
-- site_sweep_pareto for a saved sweep: one rule for both).
create or replace macro dominates(qx, qy, px, py) as
qx >= px and qy >= py and (qx > px or qy > py);
