"""Every dashboard spectrace writes, checked against Grafana's own published dashboard
schema: the types of npm's `@grafana/schema` (Grafana generates them from the CUE schema
of its dashboard kind and of each panel plugin: Dashboard, Panel, VariableModel,
FieldConfig, each plugin's Options) and the Prometheus query type of
`@grafana/grafana-foundation-sdk`, by the TypeScript compiler. The check fails on planted
invalid panels (an unknown key, a wrong type, a value outside an enum, a missing query,
an unknown panel type) and passes on the shipped dashboards and on ones written with
options.

Why TypeScript: neither package, nor PyPI's `grafana-foundation-sdk`, ships a JSON schema
or the CUE; @grafana/schema ships the schema as TypeScript types, and the PyPI package's
models read JSON without checking it (`from_json` keeps the keys it knows and drops the
rest). A JSON object literal given one of these types is checked key by key: unknown keys
(TypeScript's excess property check), the type of every value, required keys, enum
values. How JSON maps onto the types: an enum is its values (`Json<T>`); a panel plugin's
options and custom field config may leave out any key (`Defaulted<T>`), as Grafana fills
them from the plugin's published defaults (`defaultOptions`) when it loads a panel.

Needs node (Debian package `nodejs`) and `npm ci --prefix tests/grafana_schema`
(scripts/test.sh does both; the versions are pinned in tests/grafana_schema/package.json).
"""
from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess

import pytest

from spectrace.grafana import files

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMA_DIR = os.path.join(ROOT, "tests", "grafana_schema")
MODULES = os.path.join(SCHEMA_DIR, "node_modules")
TSC = os.path.join(MODULES, "typescript", "bin", "tsc")
NODE = shutil.which("node")
INSTALLED = NODE is not None and os.path.isfile(TSC)

pytestmark = [pytest.mark.grafana_schema, pytest.mark.skipif(
    not INSTALLED and not os.environ.get("CI"),  # in CI a missing schema is a failure
    reason="needs node and `npm ci --prefix tests/grafana_schema` (scripts/test.sh)")]

# panel type -> (its plugin's types module in @grafana/schema, its custom field config type
# or None). A panel of another type fails the check until its module is added here.
PANEL_TYPES = {
    "stat": ("stat/panelcfg/x/StatPanelCfg_types.gen", None),
    "timeseries": ("timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen", "FieldConfig"),
    "bargauge": ("bargauge/panelcfg/x/BarGaugePanelCfg_types.gen", None),
}
COMPOSABLE = "@grafana/schema/dist/esm/raw/composable/"
ERROR = re.compile(r"^(\w+)\.ts\(\d+,\d+\): error (TS\d+: .*)$")


def schema_ts() -> str:
    """The types a dashboard JSON file must have, from Grafana's packages."""
    imports, panels = [], []
    for i, (kind, (module, custom)) in enumerate(sorted(PANEL_TYPES.items())):
        names = f"Options as Options{i}" + (f", {custom} as Custom{i}" if custom else "")
        imports.append(f'import type {{ {names} }} from "{COMPOSABLE}{module}";')
        panels.append(f'PanelOf<"{kind}", Options{i}, {f"Custom{i}" if custom else "{}"}>')
    return "\n".join([
        'import type { Dashboard, Panel } from "@grafana/schema";',
        'import type { Dataquery } from "@grafana/grafana-foundation-sdk/prometheus";',
        *imports,
        "type Fn = (...args: any[]) => any;",
        "// JSON holds an enum's values: a string enum as its string literals",
        "export type Json<T> = unknown extends T ? T : T extends Fn ? never",
        "  : T extends string ? `${T}` : T extends number | boolean | null | undefined ? T",
        "  : T extends readonly (infer U)[] ? Json<U>[]",
        "  : { [K in keyof T as T[K] extends Fn ? never : K]: Json<T[K]> };",
        "// a plugin's options: Grafana fills the keys left out from the plugin's defaults",
        "export type Defaulted<T> = unknown extends T ? T : T extends Fn ? never",
        "  : T extends string ? `${T}` : T extends number | boolean | null | undefined ? T",
        "  : T extends readonly (infer U)[] ? Defaulted<U>[]",
        "  : { [K in keyof T as T[K] extends Fn ? never : K]?: Defaulted<T[K]> };",
        'type Fields = Json<NonNullable<Panel["fieldConfig"]>>;',
        'type FieldsOf<C> = Omit<Fields, "defaults"> & {',
        '  defaults: Omit<Fields["defaults"], "custom"> & { custom?: Defaulted<C> } };',
        "type PanelOf<K extends string, O, C> =",
        '  Omit<Json<Panel>, "type" | "options" | "fieldConfig" | "targets"> & {',
        "    type: K; options?: Defaulted<O>; fieldConfig?: FieldsOf<C>;",
        "    targets?: Json<Dataquery>[] };",
        f"export type SchemaPanel = {' | '.join(panels)};",
        'export type SchemaDashboard = Omit<Json<Dashboard>, "panels"> & '
        "{ panels?: SchemaPanel[] };", ""])


def check(dashboards: dict[str, dict], workdir) -> dict[str, list[str]]:
    """Name -> the compiler's errors for that dashboard (one compile for all)."""
    os.symlink(MODULES, workdir / "node_modules")
    (workdir / "schema.ts").write_text(schema_ts())
    for name, d in dashboards.items():
        (workdir / f"{name}.ts").write_text(
            'import type { SchemaDashboard } from "./schema";\n'
            f"export const dashboard: SchemaDashboard = {json.dumps(d, indent=2)};\n")
    (workdir / "tsconfig.json").write_text(json.dumps({
        "compilerOptions": {"strict": True, "noEmit": True, "module": "nodenext",
                            "moduleResolution": "nodenext", "target": "es2022",
                            "skipLibCheck": True, "types": []},
        "files": ["schema.ts", *(f"{n}.ts" for n in dashboards)]}))
    out = subprocess.run([NODE, TSC, "-p", "."], capture_output=True, text=True,
                         timeout=300, cwd=workdir)
    errors: dict[str, list[str]] = {name: [] for name in dashboards}
    last = None
    for line in out.stdout.splitlines():
        m = ERROR.match(line)
        if m:
            assert m.group(1) in errors, line  # schema.ts itself must compile
            last = errors[m.group(1)]
            last.append(m.group(2))
        elif last and line.startswith(" "):  # the error's explanation, line by line
            last[-1] += "\n" + line.strip()
    assert out.returncode == (2 if any(errors.values()) else 0), out.stdout + out.stderr
    return errors


def shipped() -> dict[str, dict]:
    """The repository's dashboards, and the overview as written with every option."""
    out = {}
    folder = os.path.join(ROOT, "grafana", "dashboards")
    for f in sorted(os.listdir(folder)):
        with open(os.path.join(folder, f)) as fh:
            out[re.sub(r"\W", "_", f.removesuffix(".json"))] = json.load(fh)
    opts = files.Options(selectors=('namespace="prod"', 'job=~"sglang.*"'),
                         datasource="Prometheus main", datasource_uid="prom-main")
    out["with_options"] = json.loads(files.files(opts)[files.DASHBOARD])
    return out


def test_shipped_dashboards_follow_grafanas_schema(tmp_path):
    dashboards = shipped()
    assert {p["type"] for d in dashboards.values() for p in d["panels"]} <= set(PANEL_TYPES)
    assert check(dashboards, tmp_path) == {name: [] for name in dashboards}


def _first(kind: str):
    def panel(d: dict) -> dict:
        return next(p for p in d["panels"] if p["type"] == kind)
    return panel


STAT, SERIES, BARS = _first("stat"), _first("timeseries"), _first("bargauge")
# name -> (plant into a copy of the overview, what the compiler's error must say)
PLANTS = {
    "unknown_key": (lambda d: STAT(d).update(titel="x"), "'\"titel\"' does not exist"),
    "width_as_text": (lambda d: STAT(d)["gridPos"].update(w="12"),
                      "Type 'string' is not assignable to type 'number'"),
    "threshold_mode": (lambda d: STAT(d)["fieldConfig"]["defaults"]["thresholds"].update(
        mode="relative"), "'\"relative\"' is not assignable"),
    "stat_color_mode": (lambda d: STAT(d)["options"].update(colorMode="rainbow"),
                        "'\"rainbow\"' is not assignable"),
    "bar_display_mode": (lambda d: BARS(d)["options"].update(displayMode="fancy"),
                         "'\"fancy\"' is not assignable"),
    "line_style": (lambda d: SERIES(d)["fieldConfig"]["defaults"]["custom"].update(
        drawStyle="zigzag"), "drawStyle"),
    "query_without_expr": (lambda d: STAT(d)["targets"][0].pop("expr"),
                           "Property 'expr' is missing"),
    "unknown_panel_type": (lambda d: STAT(d).update(type="graph2"),
                           "'\"graph2\"' is not assignable"),
    "no_schema_version": (lambda d: d.pop("schemaVersion"), "schemaVersion"),
    "variable_refresh": (lambda d: d["templating"]["list"][1].update(refresh=7),
                         "'7' is not assignable to type 'VariableRefresh"),
    "empty_current": (lambda d: d["templating"]["list"][1].update(current={}),
                      "missing the following properties"),
}


def test_planted_invalid_panels_fail(tmp_path):
    overview = json.loads(files.files()[files.DASHBOARD])
    dashboards = {"control": overview}
    for name, (plant, _) in PLANTS.items():
        d = copy.deepcopy(overview)
        plant(d)
        dashboards[name] = d
    errors = check(dashboards, tmp_path)
    assert errors.pop("control") == []
    for name, (_, says) in PLANTS.items():
        assert errors[name], f"{name}: the schema check did not fail"
        assert any(says in e for e in errors[name]), (name, errors[name])
