"""One command: python -m translator and its subcommands, the console scripts in
pyproject.toml, and scripts/*.py as thin wrappers over them."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from translator import cli

ROOT = Path(__file__).resolve().parent.parent
WRAPPERS = {"train.py": "train_main", "translate.py": "translate_main",
            "evaluate.py": "evaluate_main", "align.py": "align_main",
            "attention_demo.py": "demo_main", "plot_run.py": "plot_run_main"}


def test_python_dash_m_translator_lists_the_subcommands():
    result = subprocess.run([sys.executable, "-m", "translator", "--help"], capture_output=True,
                            text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    for name in ("train", "translate", "evaluate", "align", "demo", "plot-run"):
        assert f"    {name}" in result.stdout


@pytest.mark.parametrize("command, option", [("train", "--resume"), ("translate", "--n-best"),
                                             ("evaluate", "--ref"), ("align", "--gold"),
                                             ("demo", "--causal"),
                                             ("translate", "--html"),
                                             ("plot-run", "--curves-only"),
                                             ("export-page", "--weights")])
def test_each_subcommand_has_its_options(command, option, capsys):
    with pytest.raises(SystemExit) as done:
        cli.main([command, "--help"])
    assert done.value.code == 0 and option in capsys.readouterr().out


def test_an_unknown_subcommand_is_refused(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["trian"])
    assert done.value.code == 2 and "invalid choice: 'trian'" in capsys.readouterr().err


def test_the_demo_prints_the_seeds_numbers(capsys):
    assert cli.main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "UPI          0.4011   0.1978   0.4011" in out  # the softmax row of the chapter
    assert "context(it) = [ 0.2775,  1.3491]" in out
    assert cli.demo_main(["--causal"]) == 0
    causal = capsys.readouterr().out
    assert "Step 2b — mask" in causal and "UPI          1.0000   0.0000   0.0000" in causal


def test_console_scripts_name_the_command_line_functions():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    expected = {"translator-train": "train_main", "translator-translate": "translate_main",
                "translator-evaluate": "evaluate_main", "translator-align": "align_main",
                "translator-demo": "demo_main", "translator-plot-run": "plot_run_main",
                "translator-export-page": "export_page_main"}
    assert {name: scripts[name] for name in expected} == {
        name: f"translator.cli:{function}" for name, function in expected.items()}
    assert all(callable(getattr(cli, function)) for function in expected.values())


@pytest.mark.parametrize("script, function", WRAPPERS.items())
def test_scripts_are_thin_wrappers(script, function):
    """A docstring, two imports and the call: everything else lives in the package."""
    tree = ast.parse((ROOT / "scripts" / script).read_text(encoding="utf-8"))
    docstring, import_sys, import_main, guard = tree.body
    assert isinstance(docstring.value, ast.Constant)
    assert ast.unparse(import_sys) == "import sys"
    assert ast.unparse(import_main) == f"from translator.cli import {function}"
    assert ast.unparse(guard) == f"if __name__ == '__main__':\n    sys.exit({function}())"
    assert callable(getattr(cli, function))
