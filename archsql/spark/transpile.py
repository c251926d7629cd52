"""DuckDB view SQL → Spark SQL: one view source, two engines.

The views (``archsql/views``, ``archsql/kernel_corpus/views``, ``archsql/design/sql/views``) are
written once, in DuckDB's dialect.  :func:`to_spark` parses a view with sqlglot, rewrites the
few DuckDB constructs Spark has no spelling for into portable ones on the syntax tree, and lets
sqlglot's Spark generator write the text.  Every rewrite is a rule of this module, applied to
every view alike (no per-view code); docs/spark.md lists each one and why.

* **Macros** (``macros/NN_<name>.sql``) are inlined: a call ``window_pairs(s, c, w)`` becomes
  the macro's own body with the arguments substituted (defaults such as ``v := 0`` filled in),
  so the one definition stays the DuckDB macro file.  A macro whose body uses a function Spark
  lacks has a Spark body of its own in ``archsql/spark/macros/<name>.sql`` (only
  ``ranks_touched``: Spark has no ``lgamma``), checked against DuckDB's by the parity test.
* **Stars** ``t.* exclude (…)`` / ``* replace (…)`` are expanded to column lists with sqlglot's
  ``qualify_columns`` against the schema of the relations read (Spark's own, as created).
* **Aggregates**: ``list(x order by y)`` → ``transform(array_sort(collect_list(struct(y, x))))``
  (``collect_list`` keeps no order and drops NULLs; a struct keeps both); ``product`` /
  ``list_product`` → ``aggregate`` over the values (DuckDB: NULL for none).
* **Lists**: ``len`` → ``size``; 1-based slices ``l[a:b]`` → ``slice``; ``range(n)`` →
  ``sequence`` (empty for n ≤ 0, where ``sequence`` would count down); ``list_has_all``,
  ``list_intersect``, ``list_sum``; several ``unnest`` in one SELECT (DuckDB zips them) → one
  ``LATERAL VIEW inline(arrays_zip(…))``; ``generate_subscripts``.
* **Scalars**: ``format('{}…', …)`` → ``concat`` (NULL in, NULL out, as DuckDB); a cast of a
  fraction to an integer rounds half to even in DuckDB and truncates in Spark →
  ``cast(bround(x) as …)``; decimal literals (``0.9``) are DOUBLE in Spark (DuckDB's DECIMAL
  arithmetic with a DOUBLE column is DOUBLE); ``regexp_full_match`` → anchored ``rlike``;
  ``to_json(alias)`` → ``to_json(struct(alias.*))`` and ``json_extract_string(j, key)`` →
  ``get_json_object(j, '$.' || key)``; ``error`` → ``raise_error``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import sqlglot
from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB

from archsql.errors import Issue, QueryError

WRITE = "spark"


class _DuckDBOneBased(DuckDB):
    """DuckDB as sqlglot reads it, except that list indexes keep DuckDB's 1-based values in the
    tree: sqlglot's parser shifts an index to 0-based only when it can type it (``l[1]``,
    ``l[len(l)]``) and leaves ``l[a.axis + 1]`` as written, so the tree mixes both.  The
    rewrite below turns every index into ``element_at`` (1-based)."""

    INDEX_OFFSET = 0


READ = _DuckDBOneBased
SPARK_MACROS = Path(__file__).parent / "macros"


@dataclass(frozen=True)
class Macro:
    name: str
    params: tuple[str, ...]
    defaults: dict[str, exp.Expression]
    body: exp.Expression
    file: str


_HEAD = re.compile(r"create\s+or\s+replace\s+macro\s+(\w+)\s*\(", re.IGNORECASE)


def _split_top(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def parse_macro(sql: str, file: str, dialect: str = READ) -> Macro:
    """A ``create or replace macro name(params) as <expression>`` file as a :class:`Macro`."""
    text = "\n".join(line.split("--", 1)[0] if line.lstrip().startswith("--") else line for line in sql.splitlines())
    head = _HEAD.search(text)
    if head is None:
        raise QueryError(issues=[Issue("not a `create or replace macro name(...) as ...` statement", file=file)])
    depth, i = 1, head.end()
    while depth:
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
    params_text, rest = text[head.end() : i - 1], text[i:]
    body_text = re.sub(r"^\s*as\s", "", rest, count=1, flags=re.IGNORECASE).strip().rstrip(";")
    params, defaults = [], {}
    for p in _split_top(params_text):
        name, _, default = p.partition(":=")
        params.append(name.strip().lower())
        if default:
            defaults[name.strip().lower()] = sqlglot.parse_one(default, dialect=dialect)
    return Macro(head.group(1).lower(), tuple(params), defaults, sqlglot.parse_one(body_text, dialect=dialect), file)


@functools.cache
def macros() -> dict[str, Macro]:
    """Every macro the views may call, by name: the DuckDB macro files of each view folder,
    with a Spark body where ``archsql/spark/macros`` has one."""
    from archsql.views import macro_files

    out: dict[str, Macro] = {}
    for folder in view_dirs():
        for f in macro_files(folder):
            out[f.name] = parse_macro(f.sql, str(f.path))
    for path in sorted(SPARK_MACROS.glob("*.sql")):
        m = parse_macro(path.read_text(encoding="utf-8"), str(path))
        if m.name not in out:
            raise QueryError(issues=[Issue(f"a Spark body for the unknown macro '{m.name}'", file=str(path))])
        out[m.name] = m
    return out


def view_dirs() -> tuple[Path | None, ...]:
    """The view folders, in creation order: the store's, the kernel corpus's, the design views."""
    import archsql.design
    import archsql.kernel_corpus

    return (
        None,
        Path(archsql.kernel_corpus.__file__).parent / "views",
        Path(archsql.design.__file__).parent / "sql" / "views",
    )


# -- the rewrites --------------------------------------------------------------------------


def _bottom_up(tree: exp.Expression, fn) -> exp.Expression:
    """Apply ``fn`` to every node, children before parents (so a rule sees its arguments
    already rewritten, and a node a rule builds is not visited again)."""
    for node in reversed(list(tree.dfs())):
        new = fn(node)
        if new is not node:
            if node is tree:
                tree = new
            else:
                node.replace(new)
    return tree


def _fn(name: str, *args: exp.Expression) -> exp.Anonymous:
    return exp.Anonymous(this=name, expressions=list(args))


def _parse(text: str) -> exp.Expression:
    """An expression written in DuckDB's dialect (lambdas as ``lambda x: …``)."""
    return sqlglot.parse_one(text, dialect=READ)


def _lam(text: str) -> exp.Expression:
    """A lambda written ``lambda a, b: …`` (DuckDB parses one only as a function argument)."""
    return _parse(f"__f({text})").expressions[0]


def _call_args(node: exp.Anonymous, macro: Macro) -> dict[str, exp.Expression]:
    args: dict[str, exp.Expression] = dict(macro.defaults)
    positional = [a for a in node.expressions if not isinstance(a, exp.PropertyEQ | exp.Kwarg)]
    for name, value in zip(macro.params, positional, strict=False):
        args[name] = value
    for a in node.expressions:
        if isinstance(a, exp.PropertyEQ | exp.Kwarg):
            args[a.this.name.lower()] = a.expression
    missing = [p for p in macro.params if p not in args]
    if len(positional) > len(macro.params) or missing:
        raise QueryError(
            issues=[Issue(f"macro {macro.name}({', '.join(macro.params)}) called as {node.sql(READ)}", file=macro.file)]
        )
    return args


def inline_macros(tree: exp.Expression, known: Mapping[str, Macro] | None = None, depth: int = 0) -> exp.Expression:
    """Replace every macro call by the macro's body, the arguments substituted (recursively)."""
    known = macros() if known is None else known
    if depth > 20:
        raise QueryError("macros call each other more than 20 deep (a cycle?)")

    def one(node: exp.Expression) -> exp.Expression:
        if not isinstance(node, exp.Anonymous) or node.name.lower() not in known:
            return node
        macro = known[node.name.lower()]
        args = _call_args(node, macro)
        body = macro.body.copy()

        def sub(n: exp.Expression) -> exp.Expression:
            if isinstance(n, exp.Column) and not n.table and n.name.lower() in args:
                return exp.Paren(this=args[n.name.lower()].copy())
            return n

        return exp.Paren(this=inline_macros(_fold_nulls(body.transform(sub)), known, depth + 1))

    return tree.transform(one)


def _is_null(node: exp.Expression) -> bool:
    while isinstance(node, exp.Paren):
        node = node.this
    return isinstance(node, exp.Null)


def _fold_nulls(body: exp.Expression) -> exp.Expression:
    """A macro called with a literal NULL (``shard_local(size, parts, null, degree)``): fold
    ``NULL is [not] null`` and drop the CASE branches that cannot be taken, so no function sees
    an untyped NULL (Spark types ``transform(NULL, …)`` as an error; DuckDB never reaches it)."""

    def one(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Is) and _is_null(node.this) and isinstance(node.expression, exp.Null):
            return exp.true()
        if isinstance(node, exp.Not) and isinstance(node.this, exp.Boolean):
            return exp.Boolean(this=not node.this.this)
        if isinstance(node, exp.Case) and node.this is None:
            ifs = []
            for branch in node.args.get("ifs") or []:
                cond = branch.this
                if isinstance(cond, exp.Boolean) and not cond.this:
                    continue
                if isinstance(cond, exp.Boolean) and cond.this and not ifs:
                    return branch.args["true"]
                ifs.append(branch)
            if not ifs:
                return node.args.get("default") or exp.null()
            node.set("ifs", ifs)
        return node

    return _bottom_up(body, one)


def _ordered_list(
    value: exp.Expression, order: list[exp.Ordered], distinct: bool, where: exp.Expression | None
) -> exp.Expression:
    """The values of a group as an array in ``order``, NULLs kept, as DuckDB's ``list``: each
    value travels in a struct with its order keys (``collect_list`` drops NULL values and keeps
    no order); the array is sorted by the keys, then the values taken out."""
    keys = [o.this for o in order]
    fields = [exp.alias_(k.copy(), f"k{i}") for i, k in enumerate(keys)] + [exp.alias_(value.copy(), "v")]
    collect: exp.Expression = _fn("collect_set" if distinct else "collect_list", exp.Struct(expressions=fields))
    if where is not None:
        collect = exp.Filter(this=collect, expression=where.copy())
    if order:
        # a comparator honouring each key's direction and NULL placement (DuckDB: NULLS LAST)
        cmp = []
        for i, o in enumerate(order):
            first = "-1" if o.args.get("nulls_first") else "1"
            lo, hi = ("1", "-1") if o.args.get("desc") else ("-1", "1")
            cmp.append(
                f"case when l_.k{i} is null and r_.k{i} is null then 0 when l_.k{i} is null then {first} "
                f"when r_.k{i} is null then -{first} when l_.k{i} < r_.k{i} then {lo} "
                f"when l_.k{i} > r_.k{i} then {hi} else 0 end"
            )
        expr = cmp[-1]
        for c in reversed(cmp[:-1]):
            expr = f"case when ({c}) <> 0 then ({c}) else ({expr}) end"
        collect = _fn("array_sort", collect, _lam(f"lambda l_, r_: {expr}"))
    return _fn("transform", collect, _lam("lambda e_: e_.v"))


def _unwrap_agg(node: exp.Expression) -> tuple[exp.Expression, list[exp.Ordered], bool]:
    """(value, order keys, distinct) of an aggregate's argument."""
    arg = node.this
    order: list[exp.Ordered] = []
    if isinstance(arg, exp.Order):
        order = list(arg.expressions)
        arg = arg.this
    distinct = isinstance(arg, exp.Distinct)
    if distinct:
        arg = arg.expressions[0]
    return arg, order, distinct


def _rewrite_aggregates(tree: exp.Expression) -> exp.Expression:
    def one(node: exp.Expression) -> exp.Expression:
        where = None
        agg = node
        if isinstance(node, exp.Filter):
            agg, where = node.this, node.expression
        if isinstance(node, exp.IgnoreNulls) and isinstance(node.this, exp.AnyValue):
            return _fn("any_value", node.this.this.copy(), exp.true())
        if isinstance(node, exp.AnyValue):  # DuckDB's any_value skips NULLs
            if isinstance(node.parent, exp.IgnoreNulls):
                return node
            return _fn("any_value", node.this.copy(), exp.true())
        if node is agg and isinstance(node.parent, exp.Filter):
            return node  # rewritten with its FILTER
        if isinstance(agg, exp.ArrayAgg):
            value, order, distinct = _unwrap_agg(agg)
            return _ordered_list(value, order, distinct, where)
        if isinstance(agg, exp.GroupConcat):  # string_agg: NULLs skipped, NULL when none is left
            value, order, distinct = _unwrap_agg(agg)
            sep = agg.args.get("separator") or exp.Literal.string(",")
            values = _ordered_list(value, order, distinct, where)
            return _parse(
                "case when size(filter(__v, lambda x_: x_ is not null)) = 0 then null "
                "else array_join(filter(__v, lambda x_: x_ is not null), __s) end"
            ).transform(
                lambda n: (
                    (values.copy() if n.name == "__v" else sep.copy())
                    if isinstance(n, exp.Column) and n.name in ("__v", "__s")
                    else n
                )
            )
        if isinstance(node, exp.Window) and isinstance(node.this, exp.First) and isinstance(node.this.this, exp.Order):
            # first(x order by k) over (partition by p): Spark orders the window itself,
            # over the whole partition
            value, order, _ = _unwrap_agg(node.this)
            node.set("this", exp.First(this=value.copy()))
            node.set("order", exp.Order(expressions=[o.copy() for o in order]))
            node.set(
                "spec",
                exp.WindowSpec(
                    kind="ROWS", start="UNBOUNDED", start_side="PRECEDING", end="UNBOUNDED", end_side="FOLLOWING"
                ),
            )
            return node
        if isinstance(agg, exp.First) and isinstance(node.parent, exp.Window):
            return node
        if isinstance(agg, exp.First) and isinstance(agg.this, exp.Order):
            value, order, _ = _unwrap_agg(agg)
            return _fn("element_at", _ordered_list(value, order, False, where), exp.Literal.number(1))
        if isinstance(agg, exp.Anonymous) and agg.name.lower() == "product":
            values: exp.Expression = _fn("collect_list", agg.expressions[0].copy())
            if where is not None:
                values = exp.Filter(this=values, expression=where.copy())
            return _list_product(values)
        return node

    return _bottom_up(tree, one)


def _list_product(values: exp.Expression) -> exp.Expression:
    """DuckDB ``list_product``/``product``: the DOUBLE product of the non-NULL values, NULL for none."""
    v = "__p"
    return _parse(
        f"case when size(filter({v}, lambda x_: x_ is not null)) = 0 then null "
        f"else aggregate(filter({v}, lambda x_: x_ is not null), cast(1 as double), lambda acc_, x_: acc_ * x_) end"
    ).transform(lambda n: values.copy() if isinstance(n, exp.Column) and n.name == v else n)


def _sequence(start: exp.Expression, stop: exp.Expression) -> exp.Expression:
    """DuckDB ``range(start, stop)`` (stop exclusive; empty when stop <= start)."""
    return exp.If(
        this=exp.GT(this=stop.copy(), expression=start.copy()),
        true=_fn(
            "sequence",
            exp.cast(start.copy(), "bigint"),
            exp.cast(exp.Sub(this=stop.copy(), expression=exp.Literal.number(1)), "bigint"),
        ),
        false=exp.cast(_fn("array"), "array<bigint>"),
    )


_INT_TYPES = {
    exp.DataType.Type.TINYINT,
    exp.DataType.Type.SMALLINT,
    exp.DataType.Type.INT,
    exp.DataType.Type.BIGINT,
    exp.DataType.Type.INT128,
    exp.DataType.Type.UBIGINT,
    exp.DataType.Type.UINT,
}


def _literal_text(node: exp.Expression) -> str | None:
    """The text of a string literal, or of literals joined by ``||``; None otherwise."""
    if isinstance(node, exp.Literal) and node.is_string:
        return node.this
    if isinstance(node, exp.DPipe):
        left, right = _literal_text(node.this), _literal_text(node.expression)
        return None if left is None or right is None else left + right
    if isinstance(node, exp.Paren):
        return _literal_text(node.this)
    return None


def _format(node: exp.Expression) -> exp.Expression:
    args = node.expressions if isinstance(node, exp.Anonymous) else [node.this, *node.expressions]
    text = _literal_text(args[0])
    if text is None:
        raise QueryError(f"format() needs a literal format string for Spark, got {args[0].sql(READ)}")
    pieces = text.split("{}")
    if len(pieces) - 1 != len(args) - 1:
        raise QueryError(f"format() with {len(pieces) - 1} '{{}}' and {len(args) - 1} arguments: {node.sql(READ)}")
    parts: list[exp.Expression] = []
    for i, text in enumerate(pieces):
        if text:
            parts.append(exp.Literal.string(text))
        if i < len(args) - 1:
            parts.append(exp.cast(args[i + 1].copy(), "string"))
    return _fn("concat", *parts)


def _rewrite_scalars(tree: exp.Expression) -> exp.Expression:
    def one(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.CTE) and node.args.get("materialized") is not None:
            node.set("materialized", None)  # DuckDB's `as [not] materialized` hint: Spark has none
            return node
        name = node.name.lower() if isinstance(node, exp.Anonymous) else None
        if isinstance(node, exp.Format) or name == "format":
            return _format(node)
        if name == "list_product":
            return _list_product(node.expressions[0])
        if name == "list_sum":
            return _parse("aggregate(__l, cast(0 as bigint), lambda acc_, x_: acc_ + x_)").transform(
                lambda n: node.expressions[0].copy() if isinstance(n, exp.Column) and n.name == "__l" else n
            )
        if name == "list_has_all":
            a, b = node.expressions
            return exp.EQ(this=_fn("size", _fn("array_except", b.copy(), a.copy())), expression=exp.Literal.number(0))
        if name == "list_resize":  # the first n, padded with fill (NULL without one) up to n
            values, size, *fill = node.expressions
            pad = fill[0].copy() if fill else exp.Null()
            short = _fn(
                "greatest", exp.Sub(this=size.copy(), expression=_fn("size", values.copy())), exp.Literal.number(0)
            )
            return _fn(
                "concat",
                _fn("slice", values.copy(), exp.Literal.number(1), size.copy()),
                _fn("array_repeat", pad, short),
            )
        if name == "list_intersect":
            return _fn("array_intersect", *[e.copy() for e in node.expressions])
        if name == "error":
            return _fn("raise_error", *[e.copy() for e in node.expressions])
        # a whole row: DuckDB's to_json(c) of a table alias (a TableColumn once the columns are
        # qualified against a schema, a bare Column before) is Spark's to_json(struct(c.*))
        row = node.expressions[0] if name == "to_json" else None
        if isinstance(row, exp.TableColumn) or (isinstance(row, exp.Column) and not row.table):
            alias = row.name
            return _fn("to_json", _parse(f"struct({alias}.*)"))
        if isinstance(node, exp.JSONExtractScalar) and not isinstance(node.expression, exp.JSONPath | exp.Literal):
            return _fn(
                "get_json_object", node.this.copy(), _fn("concat", exp.Literal.string("$."), node.expression.copy())
            )
        if name == "regexp_full_match" or isinstance(node, exp.RegexpFullMatch):
            subject, pattern = (node.expressions if name else [node.this, node.expression])[:2]
            anchored = _fn("concat", exp.Literal.string("^(?:"), pattern.copy(), exp.Literal.string(")$"))
            return exp.RegexpLike(this=subject.copy(), expression=anchored)
        if isinstance(node, exp.GenerateSeries) and not isinstance(node.parent, exp.Table):
            start = node.args.get("start")
            end = node.args.get("end")
            if node.args.get("is_end_exclusive"):
                return _sequence(start, end)
        if (
            isinstance(node, exp.Cast)
            and node.to.this in _INT_TYPES
            and not isinstance(node.this, exp.Literal | exp.Null)
        ):
            to = exp.DataType.build("bigint") if node.to.this == exp.DataType.Type.INT128 else node.to
            return exp.Cast(this=_fn("bround", node.this.copy()), to=to)
        if isinstance(node, exp.Literal) and not node.is_string and re.fullmatch(r"\d+\.\d*|\.\d+", node.this):
            return exp.cast(node.copy(), "double")
        if (
            isinstance(node, exp.Bracket)
            and len(node.expressions) == 1
            and not isinstance(node.expressions[0], exp.Slice)
            and not (isinstance(node.expressions[0], exp.Literal) and node.expressions[0].is_string)
        ):
            # a 1-based list index, as DuckDB's (sqlglot shifts only a literal index to Spark's
            # 0-based brackets; an expression such as a.axis + 1 would stay one off); index 0
            # and out of range read NULL in DuckDB, element_at raises on 0
            idx = node.expressions[0]
            return exp.If(
                this=exp.EQ(this=idx.copy(), expression=exp.Literal.number(0)),
                true=exp.null(),
                false=_fn("element_at", node.this.copy(), idx.copy()),
            )
        if isinstance(node, exp.Bracket) and len(node.expressions) == 1 and isinstance(node.expressions[0], exp.Slice):
            sl = node.expressions[0]
            lo = sl.this or exp.Literal.number(1)
            hi = sl.expression
            if hi is None:
                hi = _fn("size", node.this.copy())
            length = exp.Add(this=exp.Sub(this=hi.copy(), expression=lo.copy()), expression=exp.Literal.number(1))
            return _fn("slice", node.this.copy(), lo.copy(), length)
        return node

    return _bottom_up(tree, one)


def _is_generator(node: exp.Expression) -> bool:
    return isinstance(node, exp.Unnest | exp.Explode) or (
        isinstance(node, exp.Anonymous) and node.name.lower() == "generate_subscripts"
    )


def _lateral_joins(tree: exp.Expression) -> exp.Expression:
    """``cross join unnest(l) as t(c)`` and ``cross join range(a, b) as t(c)`` → ``cross join
    lateral explode(…) as t(c)``: a relation later joins may read (sqlglot's default, a
    ``LATERAL VIEW`` after every join, is not)."""
    for join in list(tree.find_all(exp.Join)):
        rel = join.this
        if isinstance(rel, exp.Unnest) and len(rel.expressions) == 1:
            arr, alias = rel.expressions[0], rel.args.get("alias")
        elif isinstance(rel, exp.Table) and isinstance(rel.this, exp.GenerateSeries):
            series = rel.this
            arr, alias = _sequence(series.args["start"], series.args["end"]), rel.args.get("alias")
            if not series.args.get("is_end_exclusive"):
                arr = _sequence(
                    series.args["start"], exp.Add(this=series.args["end"], expression=exp.Literal.number(1))
                )
        else:
            continue
        join.set("this", exp.Lateral(this=_fn("explode", arr.copy()), alias=alias.copy() if alias else None))
    return tree


def _rewrite_unnests(tree: exp.Expression) -> exp.Expression:
    """DuckDB zips the ``unnest`` calls of one SELECT (NULL-padding the shorter lists) and lets
    them sit inside expressions; Spark allows one bare generator per SELECT.  Several, or one
    inside an expression → one ``LATERAL VIEW inline(arrays_zip(…))`` and columns."""
    for k, select in enumerate(list(tree.find_all(exp.Select))):
        gens = [
            n
            for p in select.expressions
            for n in p.find_all(exp.Unnest, exp.Explode, exp.Anonymous)
            if _is_generator(n)
        ]
        gens = [g for g in gens if g.find_ancestor(exp.Select) is select]
        if not gens:
            continue
        bare = len(gens) == 1 and isinstance(gens[0].parent, exp.Alias) and gens[0].parent.parent is select
        if bare or not select.args.get("from_"):
            continue
        lists = []
        alias = f"__z{k}"
        names = [f"g{i}" for i in range(len(gens))]
        for g, n in zip(gens, names, strict=True):
            if isinstance(g, exp.Anonymous):  # generate_subscripts(l, 1): 1 .. len(l)
                arr = g.expressions[0]
                lists.append(
                    _sequence(
                        exp.Literal.number(1), exp.Add(this=_fn("size", arr.copy()), expression=exp.Literal.number(1))
                    )
                )
            else:
                lists.append(g.expressions[0].copy() if isinstance(g, exp.Unnest) else g.this.copy())
            g.replace(exp.column(n, alias))
        lateral = exp.Lateral(
            this=_fn("inline", _fn("arrays_zip", *lists)),
            view=True,
            alias=exp.TableAlias(this=exp.to_identifier(alias), columns=[exp.to_identifier(n) for n in names]),
        )
        select.append("laterals", lateral)
    return tree


def _union_by_name(tree: exp.Expression) -> exp.Expression:
    """``union [all] by name`` → a plain union whose sides list the same columns in the same
    order (NULL for a column one side lacks), as DuckDB matches them by name."""

    def one(node: exp.Expression) -> exp.Expression:
        if not (isinstance(node, exp.Union) and node.args.get("by_name")):
            return node
        left, right = node.left, node.right
        names = list({n.lower(): n for n in reversed([*left.named_selects, *right.named_selects])}.values())[::-1]
        if "*" in names or not names:
            raise QueryError("union by name needs the columns of both sides (a star the schema cannot expand)")
        for side in (left, right):
            selects = [s for s in side.find_all(exp.Select) if s.find_ancestor(exp.Union) is node or s is side]
            for sel in selects if isinstance(side, exp.Union) else [side]:
                have = {e.alias_or_name.lower(): e for e in sel.expressions}
                sel.set(
                    "expressions",
                    [have[n.lower()] if n.lower() in have else exp.alias_(exp.null(), n) for n in names],
                )
        node.set("by_name", None)
        return node

    return _bottom_up(tree, one)


def _recursive_flag(tree: exp.Expression) -> exp.Expression:
    """DuckDB's ``with recursive`` covers every CTE of the list; Spark checks each CTE of a
    recursive list as recursive.  Keep the flag only when a CTE reads itself."""
    for with_ in tree.find_all(exp.With):
        if not with_.args.get("recursive"):
            continue
        reads_itself = any(
            any(t.name.lower() == cte.alias_or_name.lower() and not t.db for t in cte.this.find_all(exp.Table))
            for cte in with_.expressions
        )
        if not reads_itself:
            with_.set("recursive", False)
            continue
        for cte in list(with_.expressions):
            name = cte.alias_or_name
            body = cte.this
            if not (isinstance(body, exp.Union) and body.args.get("distinct")):
                continue
            if not any(t.name.lower() == name.lower() for t in body.find_all(exp.Table)):
                continue
            # a recursive UNION (DuckDB dedups each step) → UNION ALL walked under another
            # name, then its distinct rows under the CTE's own: the same set on a DAG
            walk = f"__{name}_walk"
            body.set("distinct", False)
            for t in body.find_all(exp.Table):
                if t.name.lower() == name.lower() and not t.db:
                    t.set("this", exp.to_identifier(walk))
            distinct = exp.CTE(
                this=sqlglot.parse_one(f"select distinct * from {walk}", dialect=READ),
                alias=exp.TableAlias(this=exp.to_identifier(name)),
            )
            cte.args["alias"].set("this", exp.to_identifier(walk))
            position = with_.expressions.index(cte)
            with_.set("expressions", [*with_.expressions[: position + 1], distinct, *with_.expressions[position + 1 :]])
    return tree


def expand_stars(tree: exp.Expression, schema: Mapping[str, Mapping[str, str]]) -> exp.Expression:
    """``* exclude`` / ``* replace`` (and plain stars next to them) as column lists."""
    from sqlglot.optimizer.qualify_columns import qualify_columns
    from sqlglot.optimizer.qualify_tables import qualify_tables

    by_name = any(u.args.get("by_name") for u in tree.find_all(exp.Union))
    if not by_name and not any(s.args.get("except_") or s.args.get("replace") for s in tree.find_all(exp.Star)):
        return tree
    qualified = qualify_tables(tree.copy(), dialect=READ)
    lowered = {t.lower(): {c.lower(): ty for c, ty in cols.items()} for t, cols in schema.items()}
    return qualify_columns(qualified, schema=lowered, expand_stars=True, dialect=READ)


def to_spark(sql: str, schema: Mapping[str, Mapping[str, str]] | None = None, *, file: str | None = None) -> str:
    """The Spark SQL of one DuckDB query (a view's body).  ``schema``: columns of the relations
    it reads (name → column → type), needed only where it uses ``* exclude``/``* replace``."""
    from sqlglot.errors import ErrorLevel, ParseError, UnsupportedError
    from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

    try:
        tree = sqlglot.parse_one(sql, dialect=READ)
    except ParseError as exc:
        raise QueryError(issues=[Issue(str(exc).splitlines()[0], file=file)]) from None
    tree = inline_macros(tree)
    # DuckDB's identifiers are case-insensitive: one spelling for every unquoted name (e_B → e_b)
    tree = normalize_identifiers(tree, dialect=READ)
    tree = _lateral_joins(tree)
    if schema is not None:
        tree = expand_stars(tree, schema)
    tree = _union_by_name(tree)
    tree = _recursive_flag(tree)
    tree = _rewrite_aggregates(tree)
    tree = _rewrite_unnests(tree)
    tree = _rewrite_scalars(tree)
    try:
        return tree.sql(dialect=WRITE, unsupported_level=ErrorLevel.RAISE, pretty=True)
    except UnsupportedError as exc:
        raise QueryError(issues=[Issue(f"does not transpile to Spark SQL: {exc}", file=file)]) from None
