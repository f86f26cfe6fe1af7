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
- in-process caches go through the memo policy (`eor.core.cache_policy`): a module- or class-level name bound to
  a mutable container (a dict, list or set literal, comprehension or call, a defaultdict, OrderedDict, Counter,
  deque or weak mapping, or a field whose default_factory makes one) that a function writes (item assignment or
  deletion, augmented assignment, a mutating method on it or an item of it, `global` rebinding; found through
  imports, `self` and `cls`) is a cache, and so is any use of functools' cache, lru_cache or cached_property;
  every cache is a memo that the policy's `memo` or `KeyedMemo` makes and its MEMOS names, and MEMOS names
  no other. Not caches: registries, written only inside functions named `register*` (and the functions within
  them) or held by an `eor.core.registry.Registry` (no container's literal or call); and NOT_CACHES, state
  whose entries cannot be made again (a lock, a count);
- sizes: no module over 500 lines, no function over 60, no class over 250, and at most 15 imports of project
  modules inside functions (`importlib.import_module` and `__import__` calls counted), with no exceptions;
- names: no two modules (`__init__` aside) share a file name, but for SHARED_NAMES, each with its reason.
- layout: `# fmt: skip` only on a table (a list, tuple, set or dict display of two items or more over several
  lines), in the packages, the benchmarks and the tests: elsewhere ruff format lays the line out.

Imports under `if TYPE_CHECKING:` never run: they count for circles alone.

`benchmarks` is a client of the project's public API, held to its function size (no function over 60 lines):
it imports only the names docs/architecture.md declares ("Public API"), each bound by its module, and nothing of
eor.cli; it edits no `sys.path` (its modules run as `python -m benchmarks.NAME` from the repository root), imports no
private name (`_name`) of the project and reaches no private attribute (the source cannot tell a project
object from another, so none at all); the tests import its modules as modules, not by file path.
"""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
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


# -- in-process caches ------------------------------------------------------------------------------------

#: the memo policy: its MEMOS names every in-process memo, each made by one of its constructors
POLICY = "eor.core.cache_policy"
MEMO_CONSTRUCTORS = frozenset({"memo", "Memo", "KeyedMemo"})
#: module- or class-level state written after import that is no cache: its entries cannot be made again
NOT_CACHES = {
    "eor.core.faults._hits": "how often each failpoint was reached in this process: a count, nothing kept",
    "eor.pipeline.stages.generation._LOCKS": "the one lock of each foreign reader, shared by every stage over it",
}
MUTABLE_TYPES = frozenset(
    {"dict", "list", "set", "bytearray", "defaultdict", "OrderedDict", "Counter", "deque", "ChainMap"}
    | {"WeakKeyDictionary", "WeakValueDictionary", "WeakSet"}
)
MUTATORS = frozenset(
    {"__setitem__", "__delitem__", "add", "append", "appendleft", "clear", "discard", "extend", "extendleft"}
    | {"insert", "pop", "popitem", "remove", "reverse", "setdefault", "sort", "update"}
)
FUNCTOOLS_CACHES = frozenset({"functools.cache", "functools.lru_cache", "functools.cached_property"})
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
LITERALS = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)


def _last_name(node: ast.expr) -> str | None:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None


def _makes(value: ast.expr | None, kinds: frozenset[str]) -> bool:
    """`value` makes one of `kinds`: calls it, or is a field whose default_factory is it or a lambda making it
    (one per instance, declared at class level); for MUTABLE_TYPES, a literal or comprehension too."""
    if kinds is MUTABLE_TYPES and isinstance(value, LITERALS):
        return True
    if not isinstance(value, ast.Call):
        return False
    factories = [keyword.value for keyword in value.keywords if keyword.arg == "default_factory"]
    return _last_name(value.func) in kinds or any(
        _last_name(factory) in kinds or (isinstance(factory, ast.Lambda) and _makes(factory.body, kinds))
        for factory in factories
    )


def _container(node: ast.expr) -> ast.expr:
    """The container an item belongs to: `X` of `X[key][other]`."""
    while isinstance(node, ast.Subscript):
        node = node.value
    return node


def _instance_memos(node: ast.AST, owner: str) -> list[str]:
    """The memos a method's statement `node` makes one per instance (`self.name = KeyedMemo()`), as
    `module.Class.name`."""
    if not isinstance(node, ast.Assign | ast.AnnAssign) or not _makes(node.value, MEMO_CONSTRUCTORS):
        return []
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return [
        f"{owner}.{target.attr}"
        for target in targets
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"
    ]


def _bindings(body: list[ast.stmt]) -> list[tuple[str, ast.expr | None]]:
    """(name, value) of the names a module's or class's own statements bind (not those of its functions)."""
    found: list[tuple[str, ast.expr | None]] = []
    for statement in body:
        if isinstance(statement, ast.Assign):
            found += [(target.id, statement.value) for target in statement.targets if isinstance(target, ast.Name)]
        elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            found.append((statement.target.id, statement.value))
        elif isinstance(statement, ast.If | ast.Try | ast.With):
            parts = [getattr(statement, part, []) for part in ("body", "orelse", "finalbody")]
            found += _bindings([child for part in parts for child in part])
    return found


class _State:
    """The project's module- and class-level state, from its source: the names (`module.NAME`,
    `module.Class.name`) bound to mutable containers, and to memos of the policy (a `@memo` loader by its
    qualified name; a memo a method makes for its instance, `self.name = KeyedMemo()`, by `module.Class.name`);
    the names that functions write (through the module's imports; `self` and `cls` are their class), except
    registries' writes; and the uses of functools' caches."""

    def __init__(self) -> None:
        self.mutable: set[str] = set()
        self.memos: set[str] = set()
        self.written: set[str] = set()
        self.functools: set[str] = set()
        for module, path in MODULES.items():
            tree = ast.parse(path.read_text(encoding="utf-8"))
            self.module, self.aliases = module, self._imports(tree)
            self._bind(module, tree.body)
            self._visit(tree, module, None, None, set())

    @staticmethod
    def _imports(tree: ast.Module) -> dict[str, str]:
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    aliases[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0]
                    )
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                aliases.update({alias.asname or alias.name: f"{node.module}.{alias.name}" for alias in node.names})
        return aliases

    def _resolve(self, node: ast.expr, owner: str | None) -> str | None:
        if isinstance(node, ast.Name):
            if node.id in ("self", "cls") and owner is not None:
                return owner
            return self.aliases.get(node.id, f"{self.module}.{node.id}")
        if isinstance(node, ast.Attribute):
            base = self._resolve(node.value, owner)
            return base and f"{base}.{node.attr}"
        return None

    def _bind(self, prefix: str, body: list[ast.stmt]) -> None:
        for name, value in _bindings(body):
            if _makes(value, MUTABLE_TYPES):
                self.mutable.add(f"{prefix}.{name}")
            if _makes(value, MEMO_CONSTRUCTORS):
                self.memos.add(f"{prefix}.{name}")

    def _visit(self, node: ast.AST, prefix: str, owner: str | None, function: str | None, declared: set[str]) -> None:
        """Walk `node`'s children; `function`: the innermost function around them (None at module or class
        level), whose writes count unless it or a function around it is a registry's (`register*`)."""
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                if function is None:
                    self._bind(f"{prefix}.{child.name}", child.body)
                self._visit(child, f"{prefix}.{child.name}", f"{prefix}.{child.name}", function, declared)
            elif isinstance(child, FUNCTIONS):
                name = getattr(child, "name", "<lambda>")
                for decorator in getattr(child, "decorator_list", []):
                    called = decorator.func if isinstance(decorator, ast.Call) else decorator
                    if _last_name(called) in MEMO_CONSTRUCTORS:
                        self.memos.add(f"{prefix}.{name}")
                inside = "register" if (function or "").startswith("register") else name
                globals_ = {n for s in ast.walk(child) if isinstance(s, ast.Global) for n in s.names}
                self._visit(child, f"{prefix}.{name}", owner, inside, globals_)
            else:
                if function is not None and owner is not None:
                    self.memos.update(_instance_memos(child, owner))
                if function is not None and not function.startswith("register"):
                    self.written.update(self._writes(child, owner, declared))
                if isinstance(child, ast.Name | ast.Attribute) and self._resolve(child, owner) in FUNCTOOLS_CACHES:
                    self.functools.add(f"{prefix}: {ast.unparse(child)}")
                self._visit(child, prefix, owner, function, declared)

    def _writes(self, node: ast.AST, owner: str | None, declared: set[str]) -> list[str | None]:
        """The names `node` writes: item assignment or deletion, augmented assignment, a mutating method's call
        (on the container or an item of it: `X[key].append`), rebinding a name declared `global`."""
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
            found = [
                self._resolve(_container(part.value), owner)
                for target in targets
                for part in ast.walk(target)
                if isinstance(part, ast.Subscript) and isinstance(part.ctx, ast.Store | ast.Del)
            ]
            if isinstance(node, ast.AugAssign):
                found.append(self._resolve(_container(node.target), owner))
            return found + [
                f"{self.module}.{target.id}"
                for target in targets
                if isinstance(target, ast.Name) and target.id in declared
            ]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            return [self._resolve(_container(node.func.value), owner)]
        return []


def _policy_memos() -> list[str]:
    """The names MEMOS lists in the policy's source (each entry's first argument)."""
    tree = ast.parse(MODULES[POLICY].read_text(encoding="utf-8"))
    values = [value for name, value in _bindings(tree.body) if name == "MEMOS" and value is not None]
    return [
        entry.args[0].value
        for value in values
        for entry in ast.walk(value)
        if isinstance(entry, ast.Call) and entry.args and isinstance(entry.args[0], ast.Constant)
    ]


def test_every_in_process_cache_is_a_memo_of_the_policy() -> None:
    """No module- or class-level mutable container that a function writes, unless MEMOS lists it or it is
    in NOT_CACHES, and no functools cache: the in-process caches are the policy's memos."""
    state = _State()
    unlisted = sorted((state.mutable & state.written) - set(_policy_memos()) - set(NOT_CACHES))
    assert unlisted == [], "caches outside the memo policy (eor.core.cache_policy.MEMOS)"
    assert sorted(state.functools) == [], "functools caches: make a memo of eor.core.cache_policy instead"
    assert sorted(set(NOT_CACHES) - state.mutable) == [], "NOT_CACHES names state that is gone"


def test_the_policy_lists_every_memo_it_makes_and_makes_every_memo_it_lists() -> None:
    """MEMOS names each memo the policy's constructors make (`@memo` loaders, module- and class-level
    KeyedMemos), once, and nothing else; the policy's docstring names each."""
    listed = _policy_memos()
    assert listed and len(listed) == len(set(listed)), "MEMOS names each memo once"
    assert sorted(set(listed) ^ _State().memos) == [], "memos made but not listed, or listed but not made"
    docstring = ast.get_docstring(ast.parse(MODULES[POLICY].read_text(encoding="utf-8"))) or ""
    assert [name for name in listed if f"`{name}`" not in docstring] == [], "missing from the policy's docstring"


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


#: the one module that renames what eor wrote (a file written whole, a folder published whole)
ATOMIC = "eor.core.atomic"


def _renames(trees: dict[str, ast.Module]) -> list[str]:
    """Where the modules `trees` rename a path: `.rename(...)`, `os.rename`, `os.replace`, or a path's one-argument
    `.replace(...)` (a string's takes two; `dataclasses.replace` copies)."""
    found = []
    for name, tree in trees.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            called = ast.unparse(node.func)
            if (
                node.func.attr == "rename"
                or called in ("os.replace", "os.rename")
                or (node.func.attr == "replace" and len(node.args) == 1 and not node.keywords)
            ) and called != "dataclasses.replace":
                found.append(f"{name}:{node.lineno}")
    return sorted(found)


def test_only_the_atomic_module_renames_what_eor_writes() -> None:
    """Files and folders written whole are published by eor.core.atomic alone (`atomic_file`, `atomic_folder`)."""
    trees = {module: ast.parse(path.read_text(encoding="utf-8")) for module, path in MODULES.items()}
    trees.update({f"benchmarks.{name}": tree for name, tree in _trees(BENCHMARKS).items()})
    found = _renames(trees)
    assert [place for place in found if not place.startswith(f"{ATOMIC}:")] == []
    assert found, "the atomic module's own renames are seen"


#: file names that more than one module of `eor`, `retrievers` and `voters` still has, each with why; the
#: list only shrinks
SHARED_NAMES = {
    "base.py": "each package's abstract base (eor.readers: a reader backend; retrievers.base: a plugin path)",
    "registry.py": "each package's registry (eor.core: the Registry class; retrievers, voters.similarity: "
    "its instances); retrievers.registry is a plugin path",
}


def _shared_names() -> dict[str, list[str]]:
    paths: dict[str, list[str]] = defaultdict(list)
    for path in MODULES.values():
        if path.name != "__init__.py":
            paths[path.name].append(str(path.relative_to(ROOT)))
    return {name: sorted(found) for name, found in paths.items() if len(found) > 1}


def test_no_two_modules_share_a_file_name() -> None:
    shared = _shared_names()
    unexplained = {name: found for name, found in shared.items() if name not in SHARED_NAMES}
    assert not unexplained, f"modules that share a file name (rename one, docs/architecture.md): {unexplained}"
    stale = sorted(set(SHARED_NAMES) - set(shared))
    assert not stale, f"SHARED_NAMES lists names no longer shared: {stale}"


# -- the formatter's exceptions: `# fmt: skip` only where a table reads better ---------------------------------

SOURCE_FOLDERS = (*PACKAGES, "benchmarks", "tests")


SKIPPED = re.compile(r"#\s*fmt:\s*(skip|off)\b")


def _table(statement: ast.stmt) -> bool:
    """Whether a statement holds a table: a list, tuple, set or dict display of two items or more over several
    lines (rows kept one to a line, or aligned, where the formatter would spread or join them)."""
    for node in ast.walk(statement):
        if isinstance(node, ast.List | ast.Tuple | ast.Set | ast.Dict) and (node.end_lineno or 0) > node.lineno:
            if len(node.keys if isinstance(node, ast.Dict) else node.elts) >= 2:
                return True
    return False


def _skips(text: str) -> list[int]:
    """The lines of a module whose comment skips the formatter (`# fmt: skip`, `# fmt: off`, however spaced)."""
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return [token.start[0] for token in tokens if token.type == tokenize.COMMENT and SKIPPED.match(token.string)]


def _unformatted() -> list[str]:
    """Each `# fmt: skip` (or `# fmt: off`) of the project's Python (its packages, benchmarks and tests) not on a
    table."""
    found = []
    for folder in SOURCE_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            if "fmt:" not in text:
                continue
            ends = {node.end_lineno: node for node in ast.walk(ast.parse(text)) if isinstance(node, ast.stmt)}
            found += [f"{path.relative_to(ROOT)}:{n}" for n in _skips(text) if not (n in ends and _table(ends[n]))]
    return found


def test_the_formatter_is_skipped_only_for_tables() -> None:
    unformatted = _unformatted()
    assert not unformatted, f"`# fmt: skip` where no table reads better (let ruff format it): {unformatted}"


# -- the voter contract: what the pipeline reads of a voter is declared (voters.protocol), never looked for -----


def _voter_lookups(folder: Path) -> list[str]:
    """Each `hasattr(...)`/`getattr(...)` under `folder` whose object is a voter (its source names one)."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
                if node.func.id in ("hasattr", "getattr") and "voter" in ast.unparse(node.args[0]).lower():
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_the_pipeline_reads_what_a_voter_declares_and_looks_for_nothing() -> None:
    """Only the door (voters.protocol.check_voter_class, on a class) asks whether a voter has something."""
    for folder in (*PACKAGES, "benchmarks"):
        assert _voter_lookups(ROOT / folder) == [], folder


def _cli_imports_and_file_names(folder: Path) -> list[str]:
    """Where the benchmarks in `folder` import from eor.cli (a command is run as `python -m eor.cli` runs it) or
    name a run folder's file (eor.runs.run_folder reads them)."""
    from eor.runs.run_folder import CONFIG_FILE, GENERATION_FILE, MADE_BY_FILE, POOL_FILE

    files = {CONFIG_FILE, GENERATION_FILE, POOL_FILE, MADE_BY_FILE}
    found = []
    for name, tree in _trees(folder).items():
        for node in ast.walk(tree):
            imported = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            imported += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            for module in imported:
                if module == "eor.cli" or module.startswith("eor.cli."):
                    found.append(f"{name}:{node.lineno} imports {module}")
            if isinstance(node, ast.Constant) and node.value in files:
                found.append(f"{name}:{node.lineno} names {node.value}")
    return found


def test_the_benchmarks_use_the_command_line_and_run_folders_through_their_doors() -> None:
    assert _cli_imports_and_file_names(BENCHMARKS) == []


#: the page whose "Public API" table declares what benchmarks/ may import (`module` | `name`, `name`, ...)
API_PAGE = ROOT / "docs" / "architecture.md"


def _declared_api() -> dict[str, set[str]]:
    """Module -> the names the "Public API" table of docs/architecture.md declares of it."""
    section = API_PAGE.read_text(encoding="utf-8").split("\n## Public API\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([\w.]+)` \| (.+) \|$", section, flags=re.MULTILINE)
    return {module: set(re.findall(r"`(\w+)`", names)) for module, names in rows}


def _project_imports(folder: Path) -> set[tuple[str, str]]:
    """(module, name) of each import of the project by the modules in `folder`; `import a.b` as (a.b, "*")."""
    found: set[tuple[str, str]] = set()
    for tree in _trees(folder).values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in PACKAGES:
                found |= {(node.module or "", alias.name) for alias in node.names}
            elif isinstance(node, ast.Import):
                found |= {(alias.name, "*") for alias in node.names if alias.name.split(".")[0] in PACKAGES}
    return found


def _top_level_names(module: str) -> set[str]:
    """The names bound at the top of a project module (definitions, assignments, imports), read from its source,
    and a package's modules (`from retrievers import notation`)."""
    path = ROOT / module.replace(".", "/")
    source = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    names = {child.stem for child in path.iterdir() if child.suffix == ".py"} if path.is_dir() else set()
    for node in ast.parse(source.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name)}
    return names


def test_the_benchmarks_import_only_the_declared_api() -> None:
    api = _declared_api()
    imported = _project_imports(BENCHMARKS)
    undeclared = sorted((module, name) for module, name in imported if name not in api.get(module, set()))
    assert undeclared == [], "declare them in docs/architecture.md's Public API, or import a declared name"


def test_the_declared_api_exists() -> None:
    """Every name the table declares is bound at the top of its module (and the table was found)."""
    api = _declared_api()
    assert len(api) > 10
    missing = sorted(f"{module}.{name}" for module, names in api.items() for name in names - _top_level_names(module))
    assert missing == []


#: what fits on the folds other than a held-out one: the complement of a held-out part, or a splitter or
#: cross-validation loop of scikit-learn's
FOLD_LOOPS = ("setdiff1d", "KFold", "StratifiedKFold", "GroupKFold", "ShuffleSplit", "PredefinedSplit",
              "cross_val_predict", "cross_val_score", "cross_validate", "check_cv", "LeaveOneOut")  # fmt: skip


def _fold_loops(folder: Path) -> list[str]:
    """Where a module under `folder` (but voters/folds.py) computes what a fold fits on by itself."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        if path == ROOT / "voters" / "folds.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and ast.unparse(node.func).rpartition(".")[2] in FOLD_LOOPS:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node.func)}")
    return found


def test_one_fold_engine() -> None:
    """Every out-of-fold estimate (selector choice, cascade, judge, calibration, the benchmarks' nested
    cross-validations) fits through voters.folds (`cross_fit`, `fold_split`): no other module takes the
    complement of a held-out part or runs a splitter of its own."""
    for folder in (*PACKAGES, "benchmarks"):
        assert _fold_loops(ROOT / folder) == [], folder


#: keys of a weights file's `meta` that only a trainer of eor.learning makes (eor.learning.trained)
WEIGHTS_META_KEYS = {"records", "chosen_voter", "probability", "top_r_train", "training", "last_step", "costs"}


def _weights_writers(folder: Path) -> list[str]:
    """Where a module in `folder` writes a voter (voters.codecs) or makes a dict with a weights file's meta keys."""
    found = []
    for name, tree in _trees(folder).items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "voters.codecs":
                found.append(f"{name}:{node.lineno} imports voters.codecs")
            elif isinstance(node, ast.Call) and ast.unparse(node.func).rpartition(".")[2] == "save_voter":
                found.append(f"{name}:{node.lineno} calls save_voter")
            elif isinstance(node, ast.Dict):
                keys = {key.value for key in node.keys if isinstance(key, ast.Constant)}
                if keys & WEIGHTS_META_KEYS:
                    found.append(f"{name}:{node.lineno} makes {sorted(keys & WEIGHTS_META_KEYS)}")
    return found


def test_the_commands_print_what_the_trainers_of_eor_learning_give_back() -> None:
    """`eor train` (every voter kind, the judge voter and the cascade ending with it included) trains through
    eor.learning, whose trainers make the weights file's metadata and give back a `Trained`; the commands parse,
    print and save what they are given."""
    assert _weights_writers(ROOT / "eor" / "commands") == []
    from eor.learning.judge_data import TrainedJudge
    from eor.learning.judged_training import TrainedJudgedCascade
    from eor.learning.trained import Trained
    from eor.learning.training import TrainedVoter

    assert all(issubclass(cls, Trained) for cls in (TrainedVoter, TrainedJudge, TrainedJudgedCascade))


#: each measure of the reports and of training, and its one home in eor.evaluation
MEASURE_HOMES = {
    "rwr_matrix": "eor/evaluation/inconsistency.py",
    "mrwr": "eor/evaluation/inconsistency.py",
    "mrlr": "eor/evaluation/inconsistency.py",
    "error_indicators": "eor/evaluation/error_breakdown.py",
    "oracle_accuracy": "eor/evaluation/upper_bound.py",
    "any_right": "eor/evaluation/upper_bound.py",
    "top_member": "eor/evaluation/upper_bound.py",
    "paired_test": "eor/evaluation/stats.py",
    "ece": "eor/evaluation/selective.py",
    "kendall_tau": "eor/evaluation/erag/correlation.py",
    "spearman_rho": "eor/evaluation/erag/correlation.py",
    "pearson_r": "eor/evaluation/erag/correlation.py",
}
#: a bare file name of a report's Markdown or page ("report.md", "erag.html")
REPORT_FILE = re.compile(r"[\w-]+\.(md|html)")


def _defined(name: str) -> list[str]:
    """The modules of the project and the benchmarks that define a function `name`."""
    return sorted(
        str(path.relative_to(ROOT))
        for folder in (*PACKAGES, "benchmarks")
        for path in (ROOT / folder).rglob("*.py")
        if any(
            isinstance(node, ast.FunctionDef) and node.name == name
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        )
    )


def _report_files_named() -> list[str]:
    """Where a module of eor, outside the writing package and the server (which lists the reports written), names a
    report's Markdown or page file."""
    found = []
    for path in (ROOT / "eor").rglob("*.py"):
        where = path.relative_to(ROOT).as_posix()
        if where.startswith(("eor/evaluation/writing/", "eor/server/")):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and REPORT_FILE.fullmatch(node.value):
                found.append(f"{where}:{node.lineno}: {node.value!r}")
    return found


def test_one_evaluation_package() -> None:
    """`eor bench`'s report, eRAG and the measures live in one package, eor.evaluation: each measure is defined once,
    in its home there; every report (`eor bench`'s, a judge voter's, `eor erag`'s, `eor utility`'s) is written by
    the one writer (eor.evaluation.writing.writer, from the sections and figures its REPORT_KINDS registers), so no
    other module names a report's Markdown or page."""
    folders = sorted(path.name for path in (ROOT / "eor").iterdir() if (path / "__init__.py").is_file())
    assert not {"bench", "erag"} & set(folders), folders
    assert {name: _defined(name) for name in MEASURE_HOMES} == {name: [home] for name, home in MEASURE_HOMES.items()}
    assert _defined("write_report") == ["eor/evaluation/writing/writer.py"]
    assert _report_files_named() == []
    from eor.evaluation.writing.writer import REPORT_KINDS

    assert REPORT_KINDS.names() == ["bench", "erag", "judge", "judge_cascade", "utility"]
