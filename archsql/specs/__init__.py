"""The YAML library: dims table, roles, components, models and their config snapshots.

``Library`` loads the registries and every component once (all errors of all files
collected), and resolves model specs by catalog name or path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from archsql.errors import Issue, SpecError, unknown_name
from archsql.schema.checks import Collector
from archsql.schema.crossref import check_component
from archsql.schema.spec import (
    ComponentSpec,
    ModelSpec,
    load_dims_table,
    load_roles,
    parse_component,
    parse_model,
)

SPECS_DIR = Path(__file__).parent
COMPONENTS_DIR = SPECS_DIR / "components"
MODELS_DIR = SPECS_DIR / "models"
CONFIGS_DIR = SPECS_DIR / "configs"
FUSION_DIR = SPECS_DIR / "fusion"  # the frameworks' fusion rules, one file per framework version
SERVING_DIR = SPECS_DIR / "serving"  # serving facts and fitted constants (archsql.schema.serving)


@dataclass
class Library:
    dims: dict[str, dict]
    roles: dict[str, dict]
    component_files: dict[str, Path]
    model_files: dict[str, Path]
    configs_dir: Path = CONFIGS_DIR
    _components: dict[str, ComponentSpec] = field(default_factory=dict)

    def component(self, name: str) -> ComponentSpec:
        """A validated component (parsed and checked on first use)."""
        if name not in self._components:
            if name not in self.component_files:
                message, hint = unknown_name("component", name, self.component_files)
                raise SpecError(issues=[Issue(message, hint=hint)])
            spec, col = parse_component(self.component_files[name])
            if spec is not None:
                check_component(col, spec, self)
            if col.issues:
                raise SpecError(issues=col.issues)
            self._components[name] = spec
        return self._components[name]

    def model_path(self, name_or_path: str | Path) -> Path:
        path = Path(name_or_path)
        if path.suffix in (".yaml", ".yml") and path.exists():
            return path
        if str(name_or_path) in self.model_files:
            return self.model_files[str(name_or_path)]
        message, hint = unknown_name("model", str(name_or_path), self.model_files)
        raise SpecError(issues=[Issue(message, hint=hint + " (or pass a path to a model .yaml)")])

    def model(self, name_or_path: str | Path) -> ModelSpec:
        path = self.model_path(name_or_path)
        spec, col = parse_model(path)
        if col.issues:
            raise SpecError(issues=col.issues)
        return spec

    def catalog(self) -> list[str]:
        return sorted(self.model_files)


def _stems(directory: Path) -> dict[str, Path]:
    return {p.stem: p for p in sorted(directory.glob("*.yaml"))} if directory.is_dir() else {}


def _model_names(directory: Path) -> dict[str, Path]:
    """Catalog name = the model's ``model:`` field when readable, else the file stem."""
    out: dict[str, Path] = {}
    for path in sorted(directory.glob("*.yaml")):
        out[path.stem] = path
    return out


def load_library(
    components_dir: Path | None = None, models_dir: Path | None = None, specs_dir: Path | None = None
) -> Library:
    base = Path(specs_dir) if specs_dir else SPECS_DIR
    comp_files = dict(_stems(COMPONENTS_DIR))
    if components_dir:
        comp_files.update(_stems(Path(components_dir)))
    model_files = dict(_model_names(MODELS_DIR))
    if models_dir:
        model_files.update(_model_names(Path(models_dir)))
    return Library(
        dims=load_dims_table(base / "dims.yaml"),
        roles=load_roles(base / "roles.yaml"),
        component_files=comp_files,
        model_files=model_files,
        configs_dir=base / "configs" if specs_dir else CONFIGS_DIR,
    )


@cache
def default_library() -> Library:
    return load_library()


__all__ = ["Collector", "Library", "default_library", "load_library"]
