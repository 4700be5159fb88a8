"""The package's layers: a module imports only from the floors below its own (or from inside
its own sub-package), so the library reads bottom-up and entry points stay on top. Integrations
with other libraries sit on one floor between the library and the entry points. Tests import
shared helpers from tests/helpers/, never from another test module."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import elmo
from elmo.extras import EXTRA_PACKAGES

TESTS = Path(__file__).resolve().parent
SRC = TESTS.parent / "src" / "elmo"

# The library's floors, lowest first. Two names on one floor may not import each other.
LIBRARY = [
    {"errors", "token_encoders"},
    {"extras", "device", "config", "layer_choice", "options"},
    {"chars", "tokenize", "io", "memory"},
    {"vocab", "modules", "runs"},
    {"loading"},
    {"embedding", "data", "optim"},  # the Embedder, its settings, the embedding job, sinks
    {"embed", "embed_file"},  # their public paths before `embedding/`: re-exports only
    {"training", "tasks"},  # a task run does not need the pretraining recipe
    {"analysis"},
]
# Integration (a part of `elmo`: a module or package; the adapters of `elmo.integrations` each
# a part) -> top-level module of the library it plugs into. Each is a thin adapter over the
# library, imports its library through `elmo.extras.import_extra`, no other integration, and
# only entry points import it. The engines and pipelines built on the embedding job or the
# BiLM (bio, onnx, ray) stand beside the adapters.
INTEGRATIONS = {
    "integrations.allennlp": "allennlp",
    "integrations.flair": "flair",
    "integrations.simple_elmo": "simple_elmo",
    "integrations.spacy": "spacy",
    "bio": "bio_embeddings",
    "onnx": "onnx",
    "ray": "ray",
}
# The adapters' public paths (`elmo.flair`, ...), above them: re-exports only.
ADAPTER_PATHS = {"allennlp", "flair", "simple_elmo", "spacy"}
# The entry points, above the integrations. The package's `__init__` gathers public names from
# every floor (the AllenNLP names included) and has none.
ENTRY_POINTS = [{"serve", "demo"}, {"cli"}, {"__main__"}]

FLOORS = [*LIBRARY, set(INTEGRATIONS), ADAPTER_PATHS, *ENTRY_POINTS]
FLOOR = {name: level for level, names in enumerate(FLOORS) for name in names}


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) for every import in `path`: `from a import b` gives `a.b`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
    return found


def part_named(dotted: tuple[str, ...]) -> str:
    """The part of `elmo` that a module path inside it (without `elmo`) belongs to: its
    top-level module or sub-package, or an adapter of `elmo.integrations`."""
    if dotted[0] == "integrations" and len(dotted) > 1:
        return f"integrations.{dotted[1]}"
    return dotted[0]


def imported_elmo_parts(path: Path) -> list[tuple[int, str]]:
    """(line, part of `elmo`) for every import of the package in `path`."""
    return [(line, part_named(tuple(module.split(".")[1:])))
            for line, module in imported_modules(path)
            if module.startswith("elmo.") and module != "elmo.__version__"]


def part_of(path: Path) -> str:
    """The part of `elmo` that the file `path` belongs to."""
    parts = path.relative_to(SRC).with_suffix("").parts
    return "__init__" if parts == ("__init__",) else part_named(parts)


def parts_of_the_package() -> set[str]:
    """Every part of `elmo`: its top-level modules and sub-packages, and the adapters."""
    top = {p.name.removesuffix(".py") for p in SRC.iterdir()
           if p.suffix == ".py" or (p / "__init__.py").is_file()} - {"__init__", "integrations"}
    return top | {f"integrations.{p.stem}" for p in (SRC / "integrations").glob("*.py")
                  if p.stem != "__init__"}


def test_every_part_is_on_a_floor_or_an_integration():
    parts = parts_of_the_package()
    unplaced = sorted(parts - set(FLOOR))
    assert not unplaced, (f"{unplaced}: put a library module on a floor of LIBRARY, or list an "
                          "integration, named after the library it plugs into, in INTEGRATIONS")


def test_no_import_from_a_floor_above_or_beside():
    wrong = []
    for path in sorted(SRC.rglob("*.py")):
        part = part_of(path)
        if part in ("__init__", "integrations"):  # public names of every layer; a docstring
            continue
        for line, imported in imported_elmo_parts(path):
            if imported != part and FLOOR[imported] >= FLOOR[part]:
                wrong.append(f"{path.relative_to(SRC)}:{line} ({part}, floor {FLOOR[part]}) "
                             f"imports {imported} (floor {FLOOR[imported]})")
    assert not wrong, "\n".join(wrong)


def test_integrations_import_their_library_through_import_extra():
    """A plain `import ray` fails with a bare ImportError; `import_extra` names our extra."""
    optional = set(EXTRA_PACKAGES) | set(INTEGRATIONS.values())
    wrong = [f"{path.relative_to(SRC)}:{line} imports {module}"
             for path in sorted(SRC.rglob("*.py")) if part_of(path) in INTEGRATIONS
             for line, module in imported_modules(path) if module.split(".")[0] in optional]
    assert not wrong, "\n".join(wrong)


def test_importing_the_library_loads_no_optional_library():
    """`import elmo`, the library's floors and the command line stay light: an optional
    library (an integration's or an extra's) loads only when its integration or feature is
    used."""
    parts = sorted({p for floor in LIBRARY for p in floor} | {"cli"})
    optional = sorted(set(EXTRA_PACKAGES) | set(INTEGRATIONS.values()))
    code = (f"import importlib, sys\nimport elmo\nfor part in {parts!r}:\n"
            f"    importlib.import_module('elmo.' + part)\n"
            f"print(' '.join(m for m in {optional!r} if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.split()
    assert not loaded, f"importing the library loaded {loaded}"


def test_no_test_module_imports_another():
    """Helpers shared by test modules live in tests/helpers/ (fixtures in conftest.py)."""
    wrong = [f"{path.relative_to(TESTS)}:{line} imports {module}"
             for path in sorted(TESTS.rglob("*.py"))
             for line, module in imported_modules(path)
             if module.startswith("tests.test_")]
    assert not wrong, "\n".join(wrong)


def test_import_elmo_loads_no_torch_until_a_public_name_is_used():
    """`elmo/__init__` names its public names lazily (so that the `elmo` command can answer
    Ctrl-C while torch imports): `import elmo` loads no torch, and each name resolves."""
    code = ("import sys, elmo\nprint('torch' in sys.modules)\n"
            "print(all(getattr(elmo, n) is not None for n in elmo.__all__))\n"
            "from elmo import Embedder\nprint(Embedder.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "True", "elmo.embedding.embedder"]


def test_the_public_names_for_type_checkers_are_the_lazy_ones():
    """The `if TYPE_CHECKING:` imports of `elmo/__init__` (what editors read) name exactly
    PUBLIC_NAMES, each from its module."""
    tree = ast.parse((SRC / "__init__.py").read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If)
                 and getattr(node.test, "id", None) == "TYPE_CHECKING")
    for_checkers = {a.name: node.module for node in block.body for a in node.names}
    assert for_checkers == elmo.PUBLIC_NAMES


def test_no_module_imports_one_that_imports_it_back():
    """No circle of imports between modules, type-only and deferred imports counted (a
    package's `__init__`, which gathers names, is not a module imported here)."""
    modules = {".".join(("elmo", *p.relative_to(SRC).with_suffix("").parts)): p
               for p in SRC.rglob("*.py") if p.name != "__init__.py"}

    def module_of(name: str) -> str | None:  # `a.b.NAME` -> the module `a.b`
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    imports = {m: {module_of(i) for _, i in imported_modules(p)} - {None, m}
               for m, p in modules.items()}
    circles = set()
    for start in modules:  # depth-first from each module, back to it
        stack, seen = [(start, (start,))], set()
        while stack:
            module, path = stack.pop()
            for imported in imports[module]:
                if imported == start:
                    circles.add(" -> ".join((*path, start)))
                elif imported not in seen:
                    seen.add(imported)
                    stack.append((imported, (*path, imported)))
    assert not circles, "\n".join(sorted(circles))


def test_the_readme_layout_lists_the_floors():
    """README.md's layout names every part once, floor by floor, as FLOORS has them."""
    readme = (TESTS.parent / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Layout", 1)[1].split("```")[1]
    listed: list[set[str]] = []
    for line in block.splitlines():
        match = re.match(r"^\s*(\d+)?\s+((?:integrations/)?[a-z_]+)(?:\.py|/)(?:\s|$)", line)
        if match is None:
            continue
        floor, name = match.groups()
        if floor is not None:
            assert int(floor) == len(listed) + 1, f"floor {floor} out of order: {line!r}"
            listed.append(set())
        listed[-1].add(name.replace("/", "."))
    assert listed == FLOORS
