"""The layering rules of docs/architecture.md, checked on the source (nothing is imported):

- no import circle among the modules of `eor`, `retrievers` and `voters`, counting imports inside functions
  (an import of `a.b.c` also runs the packages `a` and `a.b`, so those count too) and imports under
  `if TYPE_CHECKING:` (as edges to the modules they name: a class cut into halves that import each other is
  one class);
- a project module is imported inside a function only where that module, through what it imports at its
  top, loads a heavy dependency (`HEAVY`) that the importing module does not already load: the lazy import
  is what keeps `eor --help` instant;
- `retrievers` and `voters` import from `eor` only its leaf modules (`LEAVES`: the package `eor.core`), which
  import no other part of the project;
- sizes: no module over 500 lines, no function over 60, no class over 250, and at most 15 imports of project
  modules inside functions (`importlib.import_module` and `__import__` calls counted), with no exceptions.

Imports under `if TYPE_CHECKING:` never run: they count for circles alone.

`benchmarks` is a client of the project's public API, held to its function size (no function over 60 lines):
it edits no `sys.path` (its modules run as `python -m benchmarks.NAME` from the repository root), imports no
private name (`_name`) of the project and reaches no private attribute (the source cannot tell a project
object from another, so none at all); the tests import its modules as modules, not by file path.
"""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("eor", "retrievers", "voters")

#: third-party packages whose import costs a noticeable fraction of a second (or pulls in a framework):
#: `eor --help` loads none of them (tests/test_cli.py)
HEAVY = frozenset(
    {
        "faiss",
        "fastapi",
        "langchain_core",
        "llama_cpp",
        "matplotlib",
        "numpy",
        "openai",
        "ray",
        "scipy",
        "sentence_transformers",
        "sklearn",
        "torch",
        "transformers",
        "uvicorn",
    }
)

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60
MAX_CLASS_LINES = 250
MAX_INNER_IMPORTS = 15


def _modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


MODULES = _modules()
BENCHMARKS = ROOT / "benchmarks"

#: the modules of `eor` that `retrievers` and `voters` may import, which import nothing else of the project:
#: the package `eor.core`, the leaves' layer of docs/architecture.md
LEAVES = frozenset(module for module in MODULES if module == "eor.core" or module.startswith("eor.core."))


def _owner(name: str) -> str | None:
    """The project module that `name` (a module, or a name inside one) belongs to."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:n]) for n in range(1, len(parts)) if ".".join(parts[:n]) in MODULES]


class _Imports:
    """Per module: the project modules it names in imports at its top, inside functions and under
    `if TYPE_CHECKING:`, and the third-party packages it imports at its top."""

    def __init__(self) -> None:
        self.top: dict[str, set[str]] = defaultdict(set)
        self.inner: dict[str, set[str]] = defaultdict(set)
        self.typing: dict[str, set[str]] = defaultdict(set)
        self.third_party: dict[str, set[str]] = defaultdict(set)
        for module, path in MODULES.items():
            self._scan(module, path)

    def _targets(self, module: str, path: Path, node: ast.Import | ast.ImportFrom) -> tuple[set[str], set[str]]:
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
            origin = node.module or ""
            if node.level:
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            names = [f"{origin}.{alias.name}" for alias in node.names]
        project, third = set(), set()
        for name in names:
            owner = _owner(name)
            if owner is not None:
                if owner != module:
                    project.add(owner)
            elif name.split(".")[0] not in PACKAGES:
                third.add(name.split(".")[0])
        return project, third

    def _scan(self, module: str, path: Path) -> None:
        def walk(node: ast.AST, inside: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                    for node in ast.walk(ast.Module(body=child.body, type_ignores=[])):
                        if isinstance(node, ast.Import | ast.ImportFrom):
                            self.typing[module].update(self._targets(module, path, node)[0])
                    for branch in child.orelse:
                        walk(branch, inside)
                    continue
                if isinstance(child, ast.Import | ast.ImportFrom):
                    project, third = self._targets(module, path, child)
                    (self.inner if inside else self.top)[module].update(project)
                    if not inside:
                        self.third_party[module].update(third)
                    continue
                walk(child, inside or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))

        walk(ast.parse(path.read_text(encoding="utf-8")), False)

    def runs(self, target: str, importer: str) -> set[str]:
        """What importing `target` from `importer` runs: `target`, and the top-level imports of the packages
        above it that are not already running (those above the importer)."""
        running = {importer, *_parents(importer)}
        ran = {target}
        for package in _parents(target):
            if package not in running:
                ran |= self.top[package] - {importer}
        return ran

    def edges(self, module: str, *, inner: bool) -> set[str]:
        direct = self.top[module] | (self.inner[module] if inner else set())
        return {ran for target in direct for ran in self.runs(target, module)} - {module}


IMPORTS = _Imports()


@functools.cache
def _loads_heavy(module: str) -> frozenset[str]:
    """The heavy dependencies that importing `module` loads through top-level imports."""
    seen, stack, heavy = set(), [module], set()
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        heavy |= IMPORTS.third_party[current] & HEAVY
        stack.extend(IMPORTS.edges(current, inner=False) | set(_parents(current)))
    return frozenset(heavy)


def _circles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), over top, inner and typing imports."""
    edges = {module: IMPORTS.edges(module, inner=True) | IMPORTS.typing[module] - {module} for module in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(MODULES):
        if module not in index:
            visit(module)
    return found


def test_no_import_circles_counting_imports_inside_functions_and_for_typing() -> None:
    assert _circles() == []


def test_imports_inside_functions_only_for_heavy_dependencies() -> None:
    needless = sorted(
        f"{module} imports {target} inside a function"
        for module, targets in IMPORTS.inner.items()
        for target in targets
        if not _loads_heavy(target) - _loads_heavy(module)
    )
    assert needless == []


def test_retrievers_and_voters_import_only_the_leaves_of_eor() -> None:
    reaching = sorted(
        f"{module} imports {target}"
        for module in MODULES
        if module.split(".")[0] in ("retrievers", "voters")
        for target in IMPORTS.top[module] | IMPORTS.inner[module]
        if target.split(".")[0] == "eor" and target != "eor" and target not in LEAVES
    )
    assert reaching == []


def test_the_leaves_import_no_other_part_of_the_project() -> None:
    assert sorted(LEAVES - set(MODULES)) == []
    reaching = sorted(
        f"{module} imports {target}"
        for module in LEAVES
        for target in IMPORTS.top[module] | IMPORTS.inner[module]
        if target not in LEAVES and target != "eor"
    )
    assert reaching == []


def _sizes() -> dict[str, int]:
    """Everything over a limit, by name ("path", "path:Class", "path:function", "inner imports") -> its size."""
    over: dict[str, int] = {}
    for path in MODULES.values():
        text = path.read_text(encoding="utf-8")
        where = str(path.relative_to(ROOT))
        if len(text.splitlines()) > MAX_MODULE_LINES:
            over[where] = len(text.splitlines())
        for node in ast.walk(ast.parse(text)):
            limit = {ast.ClassDef: MAX_CLASS_LINES, ast.FunctionDef: MAX_FUNCTION_LINES}.get(type(node))
            if isinstance(node, ast.AsyncFunctionDef):
                limit = MAX_FUNCTION_LINES
            if limit is not None and node.end_lineno - node.lineno + 1 > limit:
                over[f"{where}:{node.name}"] = node.end_lineno - node.lineno + 1
    inner = _inner_import_count()
    if inner > MAX_INNER_IMPORTS:
        over["inner imports"] = inner
    return over


def _inner_import_count() -> int:
    """Project modules imported inside functions (one per importing module and target), plus the calls of
    `importlib.import_module` and `__import__` anywhere."""
    calls = sum(
        isinstance(node, ast.Call)
        and ast.unparse(node.func) in ("importlib.import_module", "import_module", "__import__")
        for path in MODULES.values()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
    )
    return sum(len(targets) for targets in IMPORTS.inner.values()) + calls


def test_no_module_function_or_class_over_its_size_and_few_imports_inside_functions() -> None:
    assert _sizes() == {}, "over a limit (name: its size)"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _trees(folder: Path) -> dict[str, ast.Module]:
    return {path.name: ast.parse(path.read_text(encoding="utf-8")) for path in sorted(folder.glob("*.py"))}


def _long_functions(folder: Path) -> dict[str, int]:
    """The functions over MAX_FUNCTION_LINES of the modules in `folder` ("module:function" -> its lines)."""
    return {
        f"{name}:{node.name}": node.end_lineno - node.lineno + 1
        for name, tree in _trees(folder).items()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    }


def _sys_path_edits(folder: Path) -> list[str]:
    """Where the modules in `folder` name `sys.path` (or import `path` from `sys`)."""
    return sorted(
        f"{name}:{node.lineno}"
        for name, tree in _trees(folder).items()
        for node in ast.walk(tree)
        if (isinstance(node, ast.Attribute) and node.attr == "path" and ast.unparse(node.value) == "sys")
        or (isinstance(node, ast.ImportFrom) and node.module == "sys" and any(a.name == "path" for a in node.names))
    )


def _private_import(node: ast.Import | ast.ImportFrom) -> bool:
    """Whether `node` imports a private module of the project, or a private name from a project module."""
    if isinstance(node, ast.Import):
        modules, names = [alias.name for alias in node.names], []
    else:
        modules, names = [node.module or ""], [alias.name for alias in node.names]
    project = [module for module in modules if module.split(".")[0] in PACKAGES]
    return any(_private(part) for module in project for part in module.split(".")) or bool(
        project and any(map(_private, names))
    )


def _private_names(folder: Path) -> list[str]:
    """Where the modules in `folder` import a private name or module of the project, or reach a private
    attribute (`x._name`, `getattr(x, "_name")`) of anything."""
    found = []
    for name, tree in _trees(folder).items():
        for node in ast.walk(tree):
            reached = (isinstance(node, ast.Import | ast.ImportFrom) and _private_import(node)) or (
                isinstance(node, ast.Attribute) and _private(node.attr)
            )
            reached = reached or (
                isinstance(node, ast.Call)
                and ast.unparse(node.func) == "getattr"
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
                and _private(node.args[1].value)
            )
            if reached:
                found.append(f"{name}:{getattr(node, 'lineno', 0)}: {ast.unparse(node)}")
    return sorted(found)


def _benchmarks_loaded_by_path(folder: Path) -> list[str]:
    """Where the modules in `folder` load a file of benchmarks/ by its path (importlib, runpy)."""
    loaders = ("spec_from_file_location", "run_path", "SourceFileLoader")
    return sorted(
        f"{name}:{node.lineno}"
        for name, tree in _trees(folder).items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and ast.unparse(node.func).split(".")[-1] in loaders
        and "benchmarks" in ast.unparse(node)
    )


def test_no_benchmark_function_over_the_function_size() -> None:
    assert _long_functions(BENCHMARKS) == {}, "over the limit (name: its lines)"


def test_the_benchmarks_edit_no_sys_path() -> None:
    assert _sys_path_edits(BENCHMARKS) == []


def test_the_benchmarks_use_no_private_name_of_the_project() -> None:
    assert _private_names(BENCHMARKS) == []


def test_the_tests_import_the_benchmarks_as_modules() -> None:
    assert (BENCHMARKS / "__init__.py").is_file()
    assert _benchmarks_loaded_by_path(ROOT / "tests") == []
