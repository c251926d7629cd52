"""Leave-one-out error of the kernel-time estimates (a script, not a test):
``python benchmarks/bench_interpolation.py --db STORE`` (``PYTHONPATH=.`` from the repository
root), STORE a store with an imported corpus, e.g.

    archsql --db /tmp/s.duckdb build Meta-Llama-3.1-8B
    archsql --db /tmp/s.duckdb corpus import aiconfigurator --from WHEEL --systems h200_sxm

Every grid point of the corpus (``int_kernel_grid_points``: per GPU × op kind × library, the
newest version of each grid, the fastest row per signature) is estimated as if it were not
measured (``kernel_estimate_loo``): between its two neighbours on each axis of its op kind
('interpolated'), from its one neighbour at a grid end ('extrapolated'), and by the fallback
('sol × efficiency').  Prints, per GPU × op kind × method × axis, the points, the mean
absolute percentage error (MAPE), the median and 90th percentile of |error| and the median
signed error (a bias: > 0 estimates slower than measured), then how ``kernel_estimates``
estimated the SOL side's signatures, and the wall and CPU seconds of the two queries.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

from archsql.kernel_corpus.storage import connect_read_only

LOO = """
select
    gpu,
    op_kind,
    method,
    coalesce(axis, '') as axis,
    count(*) as points,
    avg(abs(error)) as mape,
    median(abs(error)) as median_abs,
    quantile_cont(abs(error), 0.9) as p90_abs,
    median(error) as median_signed
from kernel_estimate_loo
where ($gpu is null or gpu = $gpu) and ($op_kind is null or op_kind = $op_kind)
group by all
order by gpu, op_kind, method desc, axis
"""

METHODS = """
select
    gpu,
    op_kind,
    method,
    coalesce(axes, '') as axes,
    count(*) as estimates,
    median(efficiency) as median_efficiency
from kernel_estimates
where ($gpu is null or gpu = $gpu) and ($op_kind is null or op_kind = $op_kind)
group by all
order by gpu, op_kind, method, axes
"""


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def table(header: list[str], rows: list[tuple], percent: set[int], floats: set[int]) -> str:
    def cell(i: int, v: object) -> str:
        if v is None:
            return ""
        if i in percent:
            return f"{100 * v:.1f}%"
        if i in floats:
            return f"{v:.3f}"
        return str(v)

    cells = [header, *[[cell(i, v) for i, v in enumerate(r)] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, help="a store with an imported kernel corpus")
    parser.add_argument("--gpu", help="only this GPU (e.g. 'H200 SXM')")
    parser.add_argument("--op-kind", help="only this op kind")
    parser.add_argument("--no-estimates", action="store_true", help="skip the kernel_estimates summary")
    args = parser.parse_args(argv)
    params = {"gpu": args.gpu, "op_kind": args.op_kind}
    con = connect_read_only(args.db)
    try:
        wall, cpu = time.perf_counter(), cpu_seconds()
        rows = con.execute(LOO, params).fetchall()
        wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
        print("leave-one-out error of kernel_estimates on the corpus (error = estimate / measured - 1)")
        header = ["gpu", "op_kind", "method", "axis", "points", "MAPE", "median |e|", "p90 |e|", "median e"]
        print(table(header, rows, percent={5, 6, 7, 8}, floats=set()))
        print(f"kernel_estimate_loo: {wall:.1f} s wall, {cpu:.1f} s CPU")
        if not args.no_estimates:
            wall, cpu = time.perf_counter(), cpu_seconds()
            rows = con.execute(METHODS, params).fetchall()
            wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
            print("\nkernel_estimates: the SOL side's signatures per library, by method")
            print(table(["gpu", "op_kind", "method", "axes", "estimates", "median efficiency"], rows, set(), {5}))
            print(f"kernel_estimates: {wall:.1f} s wall, {cpu:.1f} s CPU")
    finally:
        con.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
