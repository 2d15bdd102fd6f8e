"""Imports flow one way, from the math up to the faces: every module of the package may import
only modules that stand before it in `ORDER`, with no cycles and no function-local imports of
the package (which is how cycles get dodged). The checks read the source with `ast`; they are
shown to fail on a planted upward import and a planted cycle."""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "translator"

# The import order. A module may import only modules listed before it; a new module needs a
# line here, at the place its imports allow.
ORDER = [
    "__init__",  # the package's version
    "errors",  # TranslatorError, the one base of every error a user sees
    "config",  # config types: every section's dataclass, YAML and overrides
    "direction",  # Direction: hi-en, en-hi or both; its languages, tags and score sections
    "lines",  # the one line reader: only '\n' ends a line, UTF-8 errors in one sentence
    # text and data
    "links",  # word alignment links: Pharaoh files, symmetrisation, eflomal
    "corpus",  # the embedded corpus (package data) and the showcase sentences
    "rows",  # what every reader shares: DataError, BATCH_ROWS, a row's language fields
    "hub",  # the Hugging Face hub as a data source: its rows, fingerprint, offline checks
    "data",  # readers, normalisation, filters → sentence pairs
    "pair_table",  # the clean train split in Arrow: PairTable and PairWriter
    "batching",  # token batches and padding
    "metrics",  # corpus_scores: BLEU, chrF, chrF++ with signatures; facts kept
    "held_out",  # the showcase family and first tries, translated and checked
    # where: devices, processes and the run folder
    "device",  # resolve_device, resolve_precision, autocast
    "checkpoint",  # atomic checkpoint files
    "run_dir",  # RunDir: the run folder's paths, the newest run, runs/latest
    "exports",  # export folders (CTranslate2, Hugging Face): written whole, never a run's
    "distributed",  # one process or many (torchrun): ranks, means, stopping together
    "reporting",  # say(): lines for the terminal and train.log
    "resume",  # what --resume keeps, and the overrides it refuses
    "tokenizer",  # SentencePiece
    "cache",  # the prepared-data cache: keys, entries, list and clear
    "encoded",  # token ids as arrays; the three stages of prepare_data, kept in the cache
    "guided",  # guided alignment: word links of the train pairs → piece links, cached
    "finetune",  # --init-from: the parent's config, tokenizer and weights; data coverage
    # the model
    "dropout",  # inverted dropout from a fast random stream (CPU), its seed and state
    "attention",  # the seeds' four steps, multi-head attention, the KV cache
    "model",  # the Transformer
    "search",  # greedy and beam search
    "decoders",  # source ids → hypotheses: PyTorch (our search) or CTranslate2
    "translate",  # the one decoding path: the Translator's text handling, for both decoders
    "model_card",  # MODEL_CARD.md of a run or an export, from the run folder
    # views of a trained model
    "alignment",  # cross-attention → word alignments, AER
    "timeline",  # attention over training: the showcase force-decoded at each validation
    "plotting",  # heatmaps
    "explorer",  # the interactive attention explorer
    "page",  # the model in one offline page: export_page, its JavaScript decoder
    "drawing",  # a run's pictures (showcase, curves) and a translation's (--plot, --html)
    "tensorboard_log",  # train.tensorboard: scalars and showcase heatmaps as event files
    # serving and deployment
    "ct2",  # CTranslate2: export-ct2
    "hf",  # Hugging Face transformers: export-hf (Marian or Pegasus, MarianTokenizer)
    "work_queue",  # concurrent requests' sentences decoded together, in fair turns
    "serve",  # the HTTP server: POST /translate, GET / (the explorer), /health, /models
    # training
    "recipe",  # schedules, losses, optimiser, checkpoint averaging
    "build",  # build_run: data, tokenizer, guided-alignment targets, model, optimiser
    "evaluator",  # dev loss, BLEU and chrF: validation, the test score, evaluate
    "training",  # the Trainer loop, train()
    # the command line
    "demo",  # the seeds' worked examples, printed
    "cli",  # python -m translator {train,translate,evaluate,align,demo,plot-run,serve,...}
    "__main__",
]


def module_name(path: Path, package: Path) -> str:
    """"data" for translator/data.py, "corpus" for translator/corpus/__init__.py."""
    relative = path.relative_to(package).with_suffix("")
    parts = relative.parts[:-1] if relative.name == "__init__" and len(relative.parts) > 1 \
        else relative.parts
    return ".".join(parts)


def package_imports(path: Path, package: Path, modules: set[str]) -> list[tuple[str, int, bool]]:
    """(imported module, line, at module level?) for every import of the package in ``path``,
    wherever it stands (module level, functions, TYPE_CHECKING blocks)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top_level = {id(node) for node in tree.body}
    here = module_name(path, package).split(".")

    def resolve(name: str) -> str | None:  # "translator.data.x" → "data"; "translator" → __init__
        if name != "translator" and not name.startswith("translator."):
            return None
        target = name.removeprefix("translator").lstrip(".") or "__init__"
        while target not in modules and "." in target:
            target = target.rsplit(".", 1)[0]
        return target if target in modules else None

    found = []
    for node in ast.walk(tree):
        targets: list[str | None] = []
        if isinstance(node, ast.Import):
            targets = [resolve(alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from . import x, from .data import y
                base = here[: len(here) - node.level + (path.name == "__init__.py")]
                stem = ".".join(["translator", *base, *([node.module] if node.module else [])])
            else:
                stem = node.module or ""
            for alias in node.names:  # a submodule (from translator import corpus) or a name
                full = f"{stem}.{alias.name}".removeprefix("translator.")
                targets.append(full if full in modules else resolve(stem))
        found += [(target, node.lineno, id(node) in top_level) for target in targets if target]
    return sorted(set(found))


def import_graph(package: Path) -> dict[str, list[tuple[str, int, bool]]]:
    """Module → the package modules it imports, for every .py file of the package."""
    paths = sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts)
    modules = {module_name(p, package) for p in paths}
    graph = {}
    for path in paths:
        module = module_name(path, package)
        graph[module] = [edge for edge in package_imports(path, package, modules)
                         if edge[0] != module]
    return graph


def unplaced_modules(graph: dict, order: list[str]) -> list[str]:
    return sorted(module for module in graph if module not in order)


def upward_imports(graph: dict, order: list[str]) -> list[str]:
    """'config line 3 imports training, which stands after it' for every import against
    the order (modules without a place are reported by `unplaced_modules`)."""
    rank = {module: i for i, module in enumerate(order)}
    return [f"{module} line {line} imports {target}, which stands after it in the order"
            for module, edges in sorted(graph.items()) for target, line, _ in edges
            if module in rank and target in rank and rank[target] >= rank[module]]


def function_local_imports(graph: dict) -> list[str]:
    return [f"{module} line {line} imports {target} inside a function or block"
            for module, edges in sorted(graph.items()) for target, line, top in edges if not top]


def find_cycle(graph: dict) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None."""
    state: dict[str, str] = {}  # "open" while on the current path, then "done"

    def visit(module: str, path: list[str]) -> list[str] | None:
        state[module] = "open"
        for target, _, _ in graph.get(module, []):
            if state.get(target) == "open":
                return path[path.index(target):] + [target]
            if target not in state:
                cycle = visit(target, path + [target])
                if cycle:
                    return cycle
        state[module] = "done"
        return None

    for module in sorted(graph):
        if module not in state:
            cycle = visit(module, [module])
            if cycle:
                return cycle
    return None


# ---------------------------------------------------------------- the package as it is


@pytest.fixture(scope="module")
def graph():
    return import_graph(PACKAGE)


def test_the_graph_sees_the_known_imports(graph):
    """The walker finds imports in every form the package uses (a check that sees nothing
    would pass everything)."""
    assert graph["errors"] == []
    assert {"config", "data", "device", "run_dir", "translate"} <= {t for t, _, _ in
                                                                     graph["build"]
                                                                     + graph["evaluator"]}
    assert "corpus" in {t for t, _, _ in graph["drawing"]}  # from translator import corpus
    assert "cli" in {t for t, _, _ in graph["__main__"]}


def test_every_module_has_a_place_in_the_order(graph):
    assert unplaced_modules(graph, ORDER) == [], "add these modules to ORDER in this file"


def test_imports_follow_the_order(graph):
    assert upward_imports(graph, ORDER) == []


def test_there_are_no_import_cycles(graph):
    assert find_cycle(graph) is None


def test_the_package_is_imported_at_module_level_only(graph):
    assert function_local_imports(graph) == []


def test_loading_a_config_or_a_translator_loads_no_trainer_and_no_plotting():
    """Loading a config loads no torch, a Translator no trainer, and the parts of training
    (recipe, build, evaluator) no plotting; `training.train` itself draws a run's pictures at
    its end, so that the Python API writes the run folder the command does."""
    script = (
        "import sys\n"
        "def loaded(*names): return [n for n in names if n in sys.modules]\n"
        "import translator.config\n"
        "assert loaded('torch', 'translator.training', 'matplotlib') == [], 'config'\n"
        "import translator.translate\n"
        "assert loaded('translator.training', 'matplotlib') == [], 'translate'\n"
        "import translator.recipe, translator.build, translator.evaluator\n"
        "assert loaded('matplotlib', 'translator.plotting') == [], 'training parts'\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


# ---------------------------------------------------------------- the checks can fail


@pytest.fixture
def copy_of_the_package(tmp_path) -> Path:
    copy = tmp_path / "translator"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.tsv"))
    return copy


def test_a_planted_upward_import_is_caught(copy_of_the_package):
    """config importing the trainer, inside a function as a dodge would: caught as an import
    against the order, as a function-local import and as a cycle."""
    config = copy_of_the_package / "config.py"
    planted = "    from translator.training import Trainer"
    config.write_text(config.read_text(encoding="utf-8") + f"\n\ndef trainer():\n{planted}\n"
                      "    return Trainer\n", encoding="utf-8")
    line = config.read_text(encoding="utf-8").splitlines().index(planted) + 1
    graph = import_graph(copy_of_the_package)
    assert upward_imports(graph, ORDER) == [
        f"config line {line} imports training, which stands after it in the order"]
    assert f"config line {line} imports training inside a function or block" in (
        function_local_imports(graph))
    cycle = find_cycle(graph)
    assert cycle[0] == cycle[-1] and {"config", "training"} <= set(cycle)


def test_a_planted_cycle_and_an_unplaced_module_are_caught(copy_of_the_package):
    (copy_of_the_package / "errors.py").write_text("from . import newcomer\n")
    (copy_of_the_package / "newcomer.py").write_text("import translator.errors\n")
    graph = import_graph(copy_of_the_package)
    cycle = find_cycle(graph)
    assert cycle is not None and len(cycle) == 3 and set(cycle) == {"errors", "newcomer"}
    assert unplaced_modules(graph, ORDER) == ["newcomer"]
    # with newcomer placed right after errors, errors' import of it runs against the order
    placed = ORDER[: ORDER.index("errors") + 1] + ["newcomer"] + ORDER[ORDER.index("errors") + 1:]
    assert upward_imports(graph, placed) == [
        "errors line 1 imports newcomer, which stands after it in the order"]
