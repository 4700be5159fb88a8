"""The package's layers: a module imports only from the floors below its own (or from inside
its own sub-package), so the library reads bottom-up and entry points stay on top."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "elmo"

# Floor of each top-level module or sub-package of `elmo`, lowest first. Two names on one floor
# may not import each other.
FLOORS = [
    {"errors"},
    {"extras", "device", "config"},
    {"chars", "tokenize", "io", "memory"},
    {"vocab", "modules", "runs"},
    {"loading", "embed_file"},
    {"embed", "data", "optim"},
    {"training", "tasks"},  # a task run does not need the pretraining recipe
    {"analysis", "allennlp"},
    {"serve", "ray", "bio", "demo", "onnx"},
    {"cli"},
    {"__main__"},
]
FLOOR = {name: level for level, names in enumerate(FLOORS) for name in names}


def imported_elmo_parts(path: Path) -> list[tuple[int, str]]:
    """(line, top-level part of `elmo`) for every import of the package in `path`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = ([f"elmo.{a.name}" for a in node.names] if node.module == "elmo"
                       else [node.module])
        elif isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        else:
            continue
        found += [(node.lineno, m.split(".")[1]) for m in modules
                  if m.startswith("elmo.") and m != "elmo.__version__"]
    return found


def test_every_part_has_a_floor():
    parts = {p.name.removesuffix(".py") for p in SRC.iterdir()
             if p.suffix == ".py" or (p / "__init__.py").is_file()}
    assert parts - {"__init__"} <= set(FLOOR), sorted(parts - {"__init__"} - set(FLOOR))


def test_no_import_from_a_floor_above_or_beside():
    wrong = []
    for path in sorted(SRC.rglob("*.py")):
        part = path.relative_to(SRC).parts[0].removesuffix(".py")
        if part == "__init__":  # the package's public names gather every layer
            continue
        for line, imported in imported_elmo_parts(path):
            if imported != part and FLOOR[imported] >= FLOOR[part]:
                wrong.append(f"{path.relative_to(SRC)}:{line} ({part}, floor {FLOOR[part]}) "
                             f"imports {imported} (floor {FLOOR[imported]})")
    assert not wrong, "\n".join(wrong)
