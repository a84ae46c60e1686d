"""CPU: the package keeps its layers (reimpl/layers.py). Every import of a reimpl module, at module
level or inside a function, goes from a layer to itself or to a layer it may import; every module
belongs to exactly one layer; no two modules import each other, directly or round a circle (a
child importing its parent package counts); and each package's docstring states the layer the
table gives it, so the two cannot drift apart."""
import ast
from pathlib import Path

from reimpl import layers

PKG = Path(__file__).resolve().parents[1] / "reimpl"


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = list(p.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The reimpl modules that `name` imports (a `from pkg import sub` counts as importing pkg.sub)."""
    is_pkg = path.name == "__init__.py"
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "reimpl"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                target = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "reimpl":
                continue
            subs = {f"{target}.{a.name}" for a in node.names} & known
            found |= subs or {target}
    return {m for m in found if m != name}


def _graph():
    mods = _modules()
    known = set(mods)
    return {m: _imports(m, p, known) & known for m, p in mods.items()}


def test_every_module_has_a_layer():
    missing = [m for m in _modules() if m != "reimpl.layers" and layers.layer_of(m) is None]
    assert not missing, f"add these to reimpl/layers.py: {missing}"


def test_imports_point_down_the_layers():
    bad = []
    for m, deps in _graph().items():
        lm = layers.layer_of(m)
        if lm is None:
            continue
        allowed = {lm, *layers.BY_NAME[lm].may_import}
        for d in deps:
            ld = layers.layer_of(d)
            if ld is not None and ld not in allowed:
                bad.append(f"{m} ({lm}) imports {d} ({ld})")
    assert not bad, "\n".join(sorted(bad))


def test_no_import_circle():
    graph = _graph()
    state, stack, circles = {}, [], []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                circles.append(stack[stack.index(d):] + [d])
            elif d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert not circles, "import circles:\n" + "\n".join(" -> ".join(c) for c in circles)


def test_the_layer_table_lists_only_known_layers_top_down():
    names = [layer.name for layer in layers.LAYERS]
    for i, layer in enumerate(layers.LAYERS):
        assert set(layer.may_import) <= set(names[i + 1:]), f"{layer.name} may import a layer above it"


def _packages() -> dict[str, Path]:
    return {m: p for m, p in _modules().items() if p.name == "__init__.py"}


def test_every_package_docstring_names_its_layer_and_imports():
    """Each package's docstring holds layers.docstring_line for the layer of the package itself, and,
    where its submodules form another layer ("pkg.*" in the table), that layer's line too."""
    wrong = []
    for name, path in _packages().items():
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        expected = [layers.docstring_line(layers.BY_NAME[layers.layer_of(name)])]
        for layer in layers.LAYERS:
            if f"{name}.*" in layer.modules:
                expected.append(layers.docstring_line(layer, submodules=True))
        wrong += [f"{path.relative_to(PKG.parent)}: missing {line!r}" for line in expected
                  if line not in " ".join(doc.split())]
    assert not wrong, "\n".join(wrong)
