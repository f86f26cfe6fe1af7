"""What docs/architecture.md claims, checked against the source, so the page stays true:

- **the layer table**: it names packages, each folder of `eor` in one layer and no module at `eor`'s top but
  `__init__.py`; every module of `eor`, `retrievers` and `voters` is in exactly one layer (the package above
  it that the table names), and its imports, at the top and inside functions, point to its own layer or a
  lower one; its leaves are the LEAVES (`eor.core`) that tests/test_architecture.py holds `retrievers` and
  `voters` to;
- **one prompt builder**: only `eor.core.prompts` fills a prompt template (`<template>.format(...)`);
- **one atomic write**: files are written through `eor.core.atomic`, except those listed in `UNATOMIC` with why;
- **one cost model**: only `eor.runs.costs` turns tokens into seconds at the reader's rates (no division by a
  rate elsewhere, `x / rates["prompt"]` or `x / prompt_rate`, benchmarks included) and gets a reader's rates (a
  least-squares fit, or a `generation.json`'s tokens over its seconds); only `voters.spend` sums what a cascade
  has spent step by step (a cumulative sum of costs).
- **one batching loop**: above the components, only `eor.pipeline.jobs.batches` cuts a sequence a batch (or
  shard) size at a time (`range(0, len(...), ...size)`).
- **the registries**: eor's own entries are registered in the module that defines the registry, and no module of
  `eor.cli` or `eor.commands` changes a registry;
- **one number format**: no float format spec written by hand in the packages the rule covers (`FORMATTED`);
- **the caches**: the page says where each cache of `eor.core.cache_policy` lives.
"""

from __future__ import annotations

import ast
import re

from tests.test_architecture import BENCHMARKS, IMPORTS, LEAVES, MODULES, ROOT

DOC = ROOT / "docs" / "architecture.md"

#: (file, call) pairs that write a file without eor.core.atomic, and why that is right
UNATOMIC = {
    ("eor/runs/records.py", "open"): "records are appended and synced batch by batch; a torn last line is repaired",
    ("eor/core/models.py", "open"): "pieces of a packaged model joined in a temporary file that is then moved",
    ("eor/evaluation/erag/time_and_memory.py", "write_text"): "a child process's spec and result in a temporary folder",
    ("retrievers/index_store.py", "open"): "a lock file, never read",
    ("retrievers/index_store.py", "write_text"): "inside the index's temporary folder, renamed into place whole",
    ("retrievers/bm25.py", "open"): "inside the index's temporary folder, renamed into place whole",
    ("retrievers/bm25_index.py", "write_text"): "inside the index's temporary folder, renamed into place whole",
    ("retrievers/bm25_index.py", "write_bytes"): "inside the index's temporary folder, renamed into place whole",
    ("retrievers/dense.py", "write_text"): "inside the index's temporary folder, renamed into place whole",
}


def _layer_table() -> list[tuple[str, list[str]]]:
    """The rows of the doc's layer table, top to bottom: (layer, the module names it lists)."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("**"):
            names = [
                n for n in re.findall(r"`([\w.]+)`", cells[1]) if n.split(".")[0] in ("eor", "retrievers", "voters")
            ]
            rows.append((cells[0].strip("*"), names))
    return rows


def _layer_of() -> dict[str, int]:
    """Each module's layer (0 = the top row), by the longest name in the table that is it or above it."""
    listed = {name: rank for rank, (_, names) in enumerate(_layer_table()) for name in names}
    layers = {}
    for module in MODULES:
        owners = [name for name in listed if module == name or module.startswith(name + ".")]
        if owners:
            layers[module] = listed[max(owners, key=len)]
    return layers


def test_the_layer_table_lists_every_module() -> None:
    table = _layer_table()
    assert [layer for layer, _ in table] == [
        "entry points",
        "commands and evaluation",
        "the pipeline",
        "runs, records and the generation cache",
        "components",
        "leaves",
    ]
    listed = [name for _, names in table for name in names]
    assert not [name for name in listed if name not in MODULES], "the table names modules that do not exist"
    repeated = sorted({name for name in listed if listed.count(name) > 1})
    assert not repeated, f"named in two layers: {repeated}"
    missing = sorted(module for module in MODULES if module not in _layer_of() and module not in ("eor",))
    assert not missing, f"modules in no layer of docs/architecture.md: {missing}"
    leaves = {module for module, layer in _layer_of().items() if layer == len(table) - 1}
    assert leaves == LEAVES, "the doc's leaves are not tests/test_architecture.py's LEAVES"


def test_the_folder_tree_reads_as_the_layer_table() -> None:
    """The table names packages, not modules: each folder directly under eor/ is in one layer, and eor/ holds no
    module but its public face, __init__.py."""
    listed = {name for _, names in _layer_table() for name in names}
    top = sorted(path.name for path in (ROOT / "eor").glob("*.py"))
    assert top == ["__init__.py"], f"modules at eor/'s top, in no layer's package: {top}"
    folders = sorted(f"eor.{path.name}" for path in (ROOT / "eor").iterdir() if (path / "__init__.py").is_file())
    assert folders == sorted(name for name in listed if name.startswith("eor.") and name.count(".") == 1)


def test_imports_point_to_the_same_layer_or_below() -> None:
    layers, table = _layer_of(), _layer_table()
    upward = sorted(
        f"{module} ({table[layers[module]][0]}) imports {target} ({table[layers[target]][0]})"
        for module in layers
        for target in IMPORTS.edges(module, inner=True)
        if target in layers and layers[target] < layers[module]
    )
    assert not upward, "imports against docs/architecture.md's layers:\n" + "\n".join(upward)


def _python_files() -> dict[str, ast.Module]:
    return {
        str(path.relative_to(ROOT)): ast.parse(path.read_text(encoding="utf-8"))
        for package in ("eor", "retrievers", "voters")
        for path in (ROOT / package).rglob("*.py")
    }


def _calls(tree: ast.Module, method: str) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == method
    ]


def test_only_the_prompt_builder_fills_templates() -> None:
    filled = sorted(
        f"{file}:{call.lineno}"
        for file, tree in _python_files().items()
        if file != "eor/core/prompts.py"
        for call in _calls(tree, "format")
        if "template" in ast.unparse(call.func.value).lower()  # type: ignore[attr-defined]
    )
    assert not filled, f"templates filled outside eor/core/prompts.py: {filled}"


def _writes_a_file(call: ast.Call) -> bool:
    """`x.write_text(...)`, `x.write_bytes(...)`, or `x.open(mode)` / `open(path, mode)` with a writing mode."""
    method = call.func.attr  # type: ignore[attr-defined]
    if method in ("write_text", "write_bytes"):
        return True
    modes = [arg.value for arg in call.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
    modes += [k.value.value for k in call.keywords if k.arg == "mode" and isinstance(k.value, ast.Constant)]
    return method == "open" and any(set(mode) & set("wax") for mode in modes)


def test_files_are_written_atomically() -> None:
    found = {
        (file, call.func.attr)  # type: ignore[attr-defined]
        for file, tree in _python_files().items()
        if file != "eor/core/atomic.py"
        for method in ("write_text", "write_bytes", "open")
        for call in _calls(tree, method)
        if _writes_a_file(call)
    }
    unexplained = sorted(found - set(UNATOMIC))
    assert not unexplained, f"files written without eor.core.atomic: {unexplained}"
    stale = sorted(set(UNATOMIC) - found)
    assert not stale, f"UNATOMIC lists writes that are gone: {stale}"


COSTS = "eor/runs/costs.py"
#: the keys of a run's `generation.json` whose ratios are the reader's rates (eor.runs.costs.measured_rates)
TOKEN_KEYS, SECONDS_KEYS = {"prompt_tokens", "generated_tokens"}, {"prompt_seconds", "generation_seconds"}


def _code_and_benchmarks() -> dict[str, ast.Module]:
    return {
        **_python_files(),
        **{
            str(path.relative_to(ROOT)): ast.parse(path.read_text(encoding="utf-8"))
            for path in BENCHMARKS.rglob("*.py")
        },
    }


def _divisions(tree: ast.Module) -> list[ast.BinOp]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)]


def _named(node: ast.expr) -> str:
    """The name a divisor is read from (`rate`, `self.rates`, `rates["prompt"]`: the name, attribute or the
    subscripted value's), "" for a computed one (`1 - rate`)."""
    match node:
        case ast.Name(id=name) | ast.Attribute(attr=name):
            return name
        case ast.Subscript(value=value):
            return _named(value)
    return ""


def _key(node: ast.expr) -> str | None:
    """The string key of a subscript (`stats["prompt_tokens"]`), else None."""
    match node:
        case ast.Subscript(slice=ast.Constant(value=str(key))):
            return key
    return None


def test_one_cost_model() -> None:
    by_rate, rates_measured = [], []
    for file, tree in _code_and_benchmarks().items():
        if file == COSTS:
            continue
        for node in _divisions(tree):
            where = f"{file}:{node.lineno}: {ast.unparse(node)}"
            if {"rate", "rates"} & set(_named(node.right).lower().split("_")):
                by_rate.append(where)  # seconds from tokens by hand: eor.runs.costs.reader_seconds
            if _key(node.left) in TOKEN_KEYS and _key(node.right) in SECONDS_KEYS:
                rates_measured.append(where)  # a run's rates by hand: eor.runs.costs.measured_rates
    assert not by_rate, f"tokens over a rate outside {COSTS} (use reader_seconds): {by_rate}"
    assert not rates_measured, f"a reader's rates measured outside {COSTS} (use measured_rates): {rates_measured}"


def test_one_rate_fit() -> None:
    fits = sorted(
        f"{file}:{node.lineno}"
        for file, tree in _code_and_benchmarks().items()
        if file != COSTS
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and ast.unparse(node.func).rpartition(".")[2] in ("nnls", "lstsq", "curve_fit")
    )
    assert not fits, f"a least-squares fit outside {COSTS} (the rates are eor.runs.costs.fit_rates'): {fits}"


def test_one_spend_function() -> None:
    sums = sorted(
        f"{file}:{node.lineno}: {ast.unparse(node)}"
        for file, tree in _code_and_benchmarks().items()
        if file != "voters/spend.py"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and ast.unparse(node.func).rpartition(".")[2] == "cumsum"
        and "cost" in ast.unparse(node).lower()
    )
    assert not sums, f"a cascade's spend summed outside voters.spend.spend: {sums}"


def test_one_batching_loop() -> None:
    loop = re.compile(r"range\(0,\s*len\([^)]*\),\s*[\w.]*size\)")
    above_components = ("cli", "commands", "evaluation", "learning", "pipeline", "runs", "server")
    elsewhere = sorted(
        str(path.relative_to(ROOT))
        for package in above_components
        for path in (ROOT / "eor" / package).rglob("*.py")
        if path != ROOT / "eor" / "pipeline" / "jobs.py" and loop.search(path.read_text(encoding="utf-8"))
    )
    assert not elsewhere, f"batches cut outside eor.pipeline.jobs.batches: {elsewhere}"
    assert loop.search((ROOT / "eor" / "pipeline" / "jobs.py").read_text(encoding="utf-8"))


def test_the_doc_names_only_modules_that_exist() -> None:
    text = DOC.read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:eor|retrievers|voters)(?:\.\w+)+)", text))
    unknown = sorted(
        name
        for name in named
        if name not in MODULES and name.rpartition(".")[0] not in MODULES and not _is_attribute(name)
    )
    assert not unknown, f"docs/architecture.md names what does not exist: {unknown}"


def _is_attribute(name: str) -> bool:
    """`module.Name.attr`: a name inside a module (a class and its method)."""
    parts = name.split(".")
    return any(".".join(parts[:n]) in MODULES for n in range(1, len(parts) - 1))


# -- the registries: eor's own entries are registered where the registry is defined ---------------------------

#: what changes a registry: its methods, and the module-level helpers of its module that call them
REGISTRY_METHODS = frozenset({"register", "add", "unregister", "scoped"})


def _registries(files: dict[str, ast.Module]) -> dict[str, str]:
    """Registry name -> the file that defines it (`NAME = Registry(...)` at a module's top)."""
    found: dict[str, str] = {}
    for file, tree in files.items():
        for node in tree.body:
            target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
            value = getattr(node, "value", None)
            called = value.func if isinstance(value, ast.Call) else None
            if isinstance(target, ast.Name) and isinstance(called, ast.Name) and called.id == "Registry":
                found[target.id] = file
    return found


def _changes(node: ast.AST, registries: dict[str, str]) -> str | None:
    """The registry that `node` changes (a call of its method on its name), or None."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return None
    owner = node.func.value
    if node.func.attr in REGISTRY_METHODS and isinstance(owner, ast.Name) and owner.id in registries:
        return owner.id
    return None


def _helpers(files: dict[str, ast.Module], registries: dict[str, str]) -> dict[str, str]:
    """Helper name -> registry: the functions at the top of a registry's module that change it
    (`register_metric`, `search_backend`, ...)."""
    helpers: dict[str, str] = {}
    for name, file in registries.items():
        for node in files[file].body:
            if isinstance(node, ast.FunctionDef) and any(_changes(n, {name: file}) for n in ast.walk(node)):
                helpers[node.name] = name
    return helpers


def _registry_calls(node: ast.AST, registries: dict[str, str], helpers: dict[str, str], *, deep: bool):
    """(line, registry) of each call that changes a registry under `node`; `deep`: inside functions too, else
    only what runs when the module is imported (its top, class bodies, decorators)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) and not deep:
            for decorator in getattr(child, "decorator_list", []):
                yield from _registry_calls(ast.Expression(decorator), registries, helpers, deep=deep)
            continue
        if isinstance(child, ast.Call):
            func = child.func
            helper = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            registry = _changes(child, registries) or helpers.get(helper or "")
            if registry is not None:
                yield child.lineno, registry
        yield from _registry_calls(child, registries, helpers, deep=deep)


def test_eor_registers_its_own_entries_where_each_registry_is_defined() -> None:
    files = _python_files()
    registries = _registries(files)
    assert {"SOURCE_TYPES", "OPERATORS", "METRICS", "POOLINGS", "CORRECTNESS", "VOTER_KINDS", "CANDIDATES"} | {
        "READERS",
        "SEARCH_BACKENDS",
        "RETRIEVAL_METRICS",
    } <= set(registries)
    helpers = _helpers(files, registries)
    elsewhere = sorted(
        f"{file}:{line} {registry}"
        for file, tree in files.items()
        for line, registry in _registry_calls(tree, registries, helpers, deep=False)
        if registries[registry] != file
    )
    assert not elsewhere, f"eor's entries registered outside their registry's module: {elsewhere}"
    at_run_time = sorted(
        f"{file}:{line} {registry}"
        for file, tree in files.items()
        if file.startswith(("eor/cli/", "eor/commands/"))
        for line, registry in _registry_calls(tree, registries, helpers, deep=True)
    )
    assert not at_run_time, f"commands that change a registry: {at_run_time}"


# -- one number format: the floats that commands and reports show go through eor.core.formatting ---------------

#: the packages whose printed and written figures the rule covers
FORMATTED = ("eor/cli/", "eor/commands/", "eor/evaluation/", "eor/learning/")
FLOAT_SPEC = re.compile(r"[eEfFgG%]$")


def _float_specs(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, spec) of each f-string replacement field whose format spec presents a float (`.2f`, `+.1f`, `g`,
    `.3g`, `.0%`, `e`, with any width, also when part of the spec is itself a replacement field)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FormattedValue) and node.format_spec is not None:
            parts = node.format_spec.values  # type: ignore[attr-defined]
            spec = "".join(str(part.value) if isinstance(part, ast.Constant) else "{}" for part in parts)
            if FLOAT_SPEC.search(spec):
                found.append((node.lineno, spec))
    return found


def test_one_number_format() -> None:
    by_hand = sorted(
        f"{file}:{line} {spec!r}"
        for file, tree in _python_files().items()
        if file.startswith(FORMATTED)
        for line, spec in _float_specs(tree)
    )
    assert not by_hand, f"floats formatted by hand, not by eor.core.formatting: {by_hand}"


# -- the caches: the page says where each on-disk cache of the policy lives -------------------------------------


def test_the_page_places_every_cache_of_the_policy() -> None:
    policy = (ROOT / "eor" / "core" / "cache_policy.py").read_text(encoding="utf-8")
    owners = {row.rsplit("|", 2)[-2].strip() for row in re.findall(r"^\|.*\| [\w.]+ \|$", policy, re.M)} - {"module"}
    assert "voters.similarity.pair_score_cache" in owners and "retrievers.web.web_cache" in owners
    text = DOC.read_text(encoding="utf-8")
    unplaced = sorted(owner for owner in owners if f"`{owner}`" not in text)
    assert not unplaced, f"docs/architecture.md does not say where these caches live: {unplaced}"
    runs = [names for layer, names in _layer_table() if layer.startswith("runs")]
    cached_in_runs = [owner for owner in owners if owner.startswith("eor.runs.")]
    assert runs and cached_in_runs == ["eor.runs.generation_cache"]  # the runs layer's only cache
    built_on = {"voters/similarity/pair_score_cache.py", "retrievers/vector_cache.py"}  # the page: built on SqliteCache
    for file in built_on:
        assert re.search(r"class \w+\(SqliteCache\)", (ROOT / file).read_text(encoding="utf-8")), file
