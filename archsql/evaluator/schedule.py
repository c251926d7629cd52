"""expand, schedules: which block template each layer of a stack runs.

A schedule is a template name, a list of ``{template, layers}`` entries (indices, slices
whose bounds are dim expressions, ``rest``, or layer numbers a config lists), or a map from
the values of a config's per-layer list(s) to templates; it must cover every layer once and
every value the config lists.
"""

from __future__ import annotations

from typing import Any

import sympy

from archsql.errors import unknown_name
from archsql.schema.checks import add_issue, type_name
from archsql.schema.expr import ExprSyntaxError, parse_dim_expr
from archsql.schema.spec import StackSpec, Where
from archsql.schema.yamlsrc import LocList


class ScheduleExpansion:
    """The schedule steps of the expander (mixed into :class:`archsql.evaluator.expand._Expander`)."""

    def bound_int(self, text: str):
        """A dim expression bound to an integer, or False."""
        try:
            value = parse_dim_expr(text.strip(), self.symbols).xreplace(
                {self.symbols[k]: sympy.Integer(v) for k, v in self.dims.items()}
            )
        except ExprSyntaxError:
            return False
        return int(value) if value.is_Integer else False

    def schedule_from_config(self, spec: StackSpec, raw: dict, layers: int, where: Where) -> list[str] | None:
        """``{from: config.<per-layer list or pattern string>, map: {value: template}}``: one
        template per listed value; every value the config lists must be mapped.  ``from:`` may
        list several per-layer lists (e.g. attention type and dense/MoE); a layer's value is
        then its values joined by ',' (``map: {"0,1": full_moe}``)."""
        from archsql.schema.expr import eval_binding

        keys = set(raw)
        if keys != {"from", "map"} or not isinstance(raw.get("map"), dict):
            add_issue(
                self.col,
                where,
                "a schedule from the config is {from: config.<list> (or a list of them), map: {value: template}}",
                got=", ".join(sorted(map(str, keys))),
            )
            return None
        sources = raw["from"] if isinstance(raw["from"], list) else [raw["from"]]
        label = " × ".join(map(str, sources))
        columns = []
        for source in sources:
            try:
                values = eval_binding(source, self.config) if str(source).startswith("config.") else None
            except KeyError as exc:
                key, hint = exc.args
                add_issue(self.col, where, f"config key '{key}' is missing", hint=hint)
                return None
            except ExprSyntaxError as exc:
                add_issue(self.col, where, f"schedule 'from: {source}': {exc}")
                return None
            if isinstance(values, str):
                values = list(values)
            if not isinstance(values, list):
                add_issue(
                    self.col,
                    where,
                    "schedule 'from:' must name a per-layer list (or pattern string) of the config",
                    got=type_name(values),
                )
                return None
            if len(values) != layers:
                add_issue(
                    self.col,
                    where,
                    f"{source} lists {len(values)} layers, the stack repeats {layers}",
                    expected=str(layers),
                    got=str(len(values)),
                )
                return None
            columns.append(values)
        values = [",".join(str(v) for v in row) for row in zip(*columns, strict=True)]
        mapping = {str(k): v for k, v in raw["map"].items()}
        missing = sorted({str(v) for v in values} - set(mapping))
        if missing:
            add_issue(
                self.col,
                where,
                f"schedule does not cover config value(s) {', '.join(map(repr, missing))} of {label}",
                hint="map every value the config lists to a template: "
                + ", ".join(f"{m!r}: <template>" for m in missing),
            )
            return None
        unknown = sorted({t for t in mapping.values() if t not in self.model.templates})
        if unknown:
            message, hint = unknown_name("template", unknown[0], self.model.templates)
            add_issue(self.col, where, message, hint=hint)
            return None
        return [mapping[str(v)] for v in values]

    def schedule(self, spec: StackSpec, layers: int) -> list[str] | None:
        templates = self.model.templates
        raw = spec.schedule
        where = spec.keys_where.get("schedule", spec.where)
        result: list[str | None] = [None] * layers
        if isinstance(raw, dict):
            return self.schedule_from_config(spec, raw, layers, where)
        entries = [{"template": raw, "layers": f"0:{layers}"}] if isinstance(raw, str) else raw
        if not isinstance(entries, list):
            add_issue(
                self.col,
                where,
                "schedule must be a template name or a list of {template, layers}",
                expected="string or list",
                got=type_name(raw),
            )
            return None
        ok = True
        # `layers: rest` takes every layer no other entry names (so it is filled last)
        for i, entry in sorted(enumerate(entries), key=lambda e: _is_rest(e[1])):
            p = f"{where.path}[{i}]" if not isinstance(raw, str) else where.path
            line, column = raw.item_pos(i) if isinstance(raw, LocList) else (where.line, where.column)
            at = Where(getattr(raw, "file", None) or where.file, line, column, p)
            if not isinstance(entry, dict) or set(entry) - {"template", "layers"} or "template" not in entry:
                add_issue(
                    self.col,
                    at,
                    "a schedule entry maps template and layers",
                    expected="{template: NAME, layers: [i, …] | 'a:b'}",
                    got=type_name(entry),
                )
                ok = False
                continue
            tname = entry["template"]
            if tname not in templates:
                message, hint = unknown_name("template", str(tname), templates)
                add_issue(self.col, at, message, hint=hint)
                ok = False
                continue
            if _is_rest(entry):
                idx = [layer for layer, t in enumerate(result) if t is None]
            elif is_config_list(entry.get("layers")):
                idx = self.config_layers(entry["layers"], Where(at.file, at.line, at.column, f"{p}.layers"))
                if idx is None:
                    ok = False
                    continue
            else:
                idx = layer_indices(entry.get("layers", f"0:{layers}"), layers, self.bound_int)
            if idx is None:
                add_issue(
                    self.col,
                    Where(at.file, at.line, at.column, f"{p}.layers"),
                    "layers must be a list of layer indices, a slice 'a:b', a config list or 'rest'",
                    expected="[i, …], 'a:b[:step]', {from: config.<index list>, base: 0|1} "
                    "or 'rest' (every layer no other entry names)",
                    got=type_name(entry.get("layers")),
                )
                ok = False
                continue
            for layer in idx:
                if not 0 <= layer < layers:
                    add_issue(
                        self.col,
                        at,
                        f"layer {layer} is outside 0..{layers - 1}",
                        expected=f"0..{layers - 1}",
                        got=str(layer),
                    )
                    ok = False
                elif result[layer] is not None:
                    add_issue(
                        self.col,
                        at,
                        f"layer {layer} is scheduled twice ({result[layer]} and {tname})",
                        hint="every layer needs exactly one template",
                    )
                    ok = False
                else:
                    result[layer] = tname
        missing = [i for i, t in enumerate(result) if t is None]
        if ok and missing:
            add_issue(
                self.col,
                where,
                f"schedule of stack '{spec.name}' does not cover layers {_ranges(missing)}",
                expected=f"layers 0..{layers - 1} (repeat = {layers})",
                got=f"{layers - len(missing)} scheduled",
                hint="every layer needs exactly one template; add an entry for the missing layers",
            )
            ok = False
        return result if ok else None  # type: ignore[return-value]

    def config_layers(self, raw: dict, where: Where) -> list[int] | None:
        """``{from: config.<list of layer numbers>, base: b}``: the layers a config lists by
        number (``base: 1`` when the config counts layers from 1, as Kimi-K3's
        linear_attn_config.full_attn_layers does), as 0-based indices.  The config stays the
        one source of the numbers."""
        from archsql.schema.expr import eval_binding

        form = "{from: config.<list of layer numbers>, base: 0 | 1}"
        if set(raw) - {"from", "base"} or not str(raw.get("from", "")).startswith("config."):
            add_issue(self.col, where, f"layers from the config are {form}", got=", ".join(sorted(map(str, raw))))
            return None
        base = raw.get("base", 0)
        if base not in (0, 1) or isinstance(base, bool):
            add_issue(
                self.col,
                where,
                "base: is the number the config gives the first layer",
                expected="0 or 1",
                got=repr(base),
            )
            return None
        try:
            values = eval_binding(raw["from"], self.config)
        except KeyError as exc:
            key, hint = exc.args
            add_issue(self.col, where, f"config key '{key}' is missing", hint=hint)
            return None
        except ExprSyntaxError as exc:
            add_issue(self.col, where, f"layers 'from: {raw['from']}': {exc}")
            return None
        if not isinstance(values, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            add_issue(
                self.col,
                where,
                f"{raw['from']} must be a list of layer numbers",
                expected="a list of integers",
                got=type_name(values),
            )
            return None
        return [v - base for v in values]


def templates_named(raw: Any) -> set[str]:
    """Template names a schedule spec mentions (string, entries, or a config map)."""
    if isinstance(raw, str):
        return {raw}
    if isinstance(raw, dict) and isinstance(raw.get("map"), dict):
        return {str(v) for v in raw["map"].values()}
    if isinstance(raw, list):
        return {str(e.get("template")) for e in raw if isinstance(e, dict)}
    return set()


def _is_rest(entry: Any) -> bool:
    return isinstance(entry, dict) and entry.get("layers") == "rest"


def is_config_list(raw: Any) -> bool:
    return isinstance(raw, dict) and "from" in raw


def layer_indices(raw: Any, layers: int, bound_int) -> list[int] | None:
    """A list of indices, or a slice 'a:b[:step]' whose bounds are dim expressions
    (e.g. '0:first_k_dense', 'first_k_dense:')."""
    if isinstance(raw, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in raw):
        return list(raw)
    if isinstance(raw, str) and raw.count(":") in (1, 2):
        bounds = [bound_int(b) if b.strip() else None for b in raw.split(":")]
        if any(b is False for b in bounds):
            return None
        return list(range(layers))[slice(*bounds)]
    return None


def _ranges(idx: list[int]) -> str:
    return ", ".join(str(i) for i in idx[:8]) + (" …" if len(idx) > 8 else "")
