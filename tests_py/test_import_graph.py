"""The modules of pylucid import each other without a circle: each one
only imports the layers below it (also lazily, inside functions), so that
the runtime under tensor.py stays below autograd and dlpack."""

import ast
import pathlib

import pylucid

PKG = pathlib.Path(pylucid.__file__).parent
MODULES = {p.stem: p for p in PKG.glob("*.py") if p.stem != "__init__"}


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and (
        (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
        or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING"))


def _imports(path: pathlib.Path) -> set:
    """The package modules path imports anywhere (at top level or in a
    function), except under ``if TYPE_CHECKING:``."""
    found = set()

    def visit(node: ast.AST) -> None:
        if _is_type_checking(node):
            return
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module is None:
                found.update(a.name for a in node.names)
            else:
                found.add(node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("pylucid."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("pylucid."))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return found & set(MODULES)


def _cycle(graph: dict) -> list:
    """A cycle of the graph as a list of modules, or []."""
    state = {}
    stack = []

    def dfs(m: str) -> list:
        state[m] = "open"
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == "open":
                return stack[stack.index(n):] + [n]
            if n not in state:
                found = dfs(n)
                if found:
                    return found
        state[m] = "done"
        stack.pop()
        return []

    for m in sorted(graph):
        if m not in state:
            found = dfs(m)
            if found:
                return found
    return []


def test_the_walk_sees_the_imports():
    graph = {m: _imports(p) for m, p in MODULES.items()}
    assert {"tensor", "_lib"} <= graph["autograd"]
    assert "tensor" in graph["dlpack"] and "tensor" in graph["ops"]
    assert "_repr" in graph["tensor"]  # a lazy import inside a method counts
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_module_imports_another_in_a_circle():
    graph = {m: _imports(p) for m, p in MODULES.items()}
    assert _cycle(graph) == []
    assert not graph["tensor"] & {"autograd", "dlpack", "ops", "amp"}
    # the runtime layer sits under tensor and knows nothing of Tensor
    assert graph["_runtime"] == {"_lib"}
    assert "_runtime" in graph["tensor"] and "_runtime" in graph["autograd"] and "_runtime" in graph["dlpack"]


def test_no_module_imports_ctypes() -> None:
    # DLPack capsules are made and taken in the C extension (python/csrc): a
    # ctypes capsule destructor masks the consumer's exception, and
    # ctypes.pythonapi is not available everywhere.
    offenders = []
    for name, path in sorted({**MODULES, "__init__": PKG / "__init__.py"}.items()):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "ctypes" for a in node.names):
                offenders.append(name)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "ctypes":
                offenders.append(name)
    assert not offenders, offenders
    assert len(MODULES) > 5  # the scan saw the package


# Frameworks are bridged by one public module each (with its private
# helper modules), which nothing outside that bridge imports: `import
# pylucid` never imports the framework (the extras are optional).
BRIDGES = {"jax": "jax", "torch": "torch", "_torch_ops": "torch", "dask": "dask"}  # module -> its framework


def _top_level_imports(path: pathlib.Path) -> set:
    """The top-level names of every absolute import in path (anywhere)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_only_the_bridge_imports_its_framework() -> None:
    assert set(BRIDGES) <= set(MODULES)
    for name, path in sorted({**MODULES, "__init__": PKG / "__init__.py"}.items()):
        frameworks = _top_level_imports(path) & set(BRIDGES.values())
        allowed = {BRIDGES[name]} if name in BRIDGES else set()
        assert frameworks <= allowed, (name, frameworks)
    assert "jax" in _top_level_imports(MODULES["jax"])  # the scan sees the bridge's own import
    assert "torch" in _top_level_imports(MODULES["torch"])
    assert "dask" in _top_level_imports(MODULES["dask"])


def test_no_module_imports_a_bridge() -> None:
    graph = {m: _imports(p) for m, p in MODULES.items()}
    graph["__init__"] = _imports(PKG / "__init__.py")
    for name, deps in graph.items():
        own = {m for m in BRIDGES if name in BRIDGES and BRIDGES[m] == BRIDGES[name]}  # the same bridge's modules
        assert not deps & (set(BRIDGES) - own), (name, deps & set(BRIDGES))
    assert "_torch_ops" in graph["torch"]  # the scan sees the bridge's own helper


def test_import_pylucid_imports_no_framework() -> None:
    import subprocess
    import sys

    code = ("import sys, pylucid, pylucid.ops, pylucid.autograd, pylucid.dlpack, pylucid.amp; "
            "print(sorted(m for m in %r if m in sys.modules))" % sorted(set(BRIDGES.values())))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout
