"""The package's shape: imports flow one way, no module grows past 500 lines, and every
backend and direct variant implements its protocol (convt/_backends/base.py,
convt/_backends/direct/base.py). Reads the convt that is imported (source tree or wheel)."""
import ast
import os

import pytest

import convt
from convt._backends import BACKENDS
from convt._backends.direct import base as variant_base
from convt._backends.direct import registry

ROOT = os.path.dirname(convt.__file__)
FRONT_ENDS = {"convt", "convt.__main__", "convt._api", "convt.onnx", "convt.openvino",
              "convt.onednn", "convt.dask", "convt.torch", "convt.jax", "convt.tensorflow",
              "convt.keras"}


def _modules():
    out = {}
    for dirpath, _, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(dirpath, f), os.path.dirname(ROOT))
                name = rel[:-3].replace(os.sep, ".")
                out[name[:-9] if name.endswith(".__init__") else name] = os.path.join(dirpath, f)
    return out


MODULES = _modules()


def _imports(name, path):
    """convt modules ``name`` imports, at any depth of the file (deferred imports count)."""
    package = name.split(".") if path.endswith("__init__.py") else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = (".".join(package[:len(package) - node.level + 1] + [node.module or ""])
                    .rstrip(".") if node.level else node.module)
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return {m for m in found if m in MODULES and m != name}


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


def _layer(module):
    for prefix in ("convt._geometry", "convt._dispatch", "convt._backends", "convt._kernels",
                   "convt._onnx", "convt._translate"):
        if module == prefix or module.startswith(prefix + "."):
            return prefix
    return "front end" if module in FRONT_ENDS else module


# What each layer may import besides itself (the facade `convt` and convt._version aside).
ALLOWED = {
    "convt._geometry": set(),
    "convt._backends": {"convt._kernels"},
    "convt._kernels": set(),
    "convt._dispatch": {"convt._geometry", "convt._backends", "convt._kernels"},
    "convt._translate": {"convt._geometry", "front end"},   # front-end level, above them
}


def test_only_the_facade_and_the_cli_import_the_translator():
    users = {m for m, deps in GRAPH.items() if any(_layer(d) == "convt._translate" for d in deps)
             and _layer(m) != "convt._translate"}
    assert users <= {"convt", "convt.__main__"}, users


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_flow_one_way(module):
    layer = _layer(module)
    if layer not in ALLOWED:
        return
    wrong = {m for m in GRAPH[module] - {"convt._version"}
             if _layer(m) != layer and _layer(m) not in ALLOWED[layer]}
    assert not wrong, f"{module} ({layer}) imports {sorted(wrong)}"


def test_no_import_cycle():
    index, low, stack, on, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in GRAPH[v] - {"convt"}:   # the facade re-exports; nothing imports it back
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for m in sorted(GRAPH):
        if m not in index:
            visit(m)
    assert not cycles


def test_no_source_file_over_500_lines():
    long = []
    for dirpath, _, files in os.walk(ROOT):
        for f in files:
            if f.endswith((".py", ".pyx", ".pxd", ".h")) and f != "_build_info.py":
                path = os.path.join(dirpath, f)
                with open(path, encoding="utf-8") as fh:
                    n = sum(1 for _ in fh)
                if n > 500:
                    long.append((os.path.relpath(path, ROOT), n))
    assert not long


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_backends_implement_the_protocol(name):
    backend = BACKENDS[name]
    assert backend.name == name
    for method in ("estimate", "prepare", "workspace_bytes"):
        assert callable(getattr(backend, method)), (name, method)


@pytest.mark.parametrize("variant", registry.VARIANTS, ids=lambda v: v.name)
def test_variants_implement_the_protocol(variant):
    assert isinstance(variant, variant_base.Variant)
    assert registry.BY_NAME[variant.name] is variant
    overridden = {m for m in ("claim", "rate", "prepare")
                  if getattr(type(variant), m) is not getattr(variant_base.Variant, m)}
    assert overridden == {"claim", "rate", "prepare"}, variant.name
    assert variant.fallback is None or variant.fallback in registry.BY_NAME


def test_the_last_variant_claims_every_geometry():
    # the pixel kernel: the rule always ends somewhere
    assert registry.VARIANTS[-1].name == "pixel"
