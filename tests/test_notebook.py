"""docs/walkthrough.ipynb runs top to bottom (a short training run, set through the
environment), fails on any cell error, and shows the heatmap and the attention explorer; the
committed file carries no outputs. Executing it needs the notebook extra
(pip install -e ".[notebook]"): skipped without it."""

import json
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[1] / "docs" / "walkthrough.ipynb"


def tagged(notebook, tag: str) -> dict:
    cells = [cell for cell in notebook["cells"] if tag in cell.get("metadata", {}).get("tags", [])]
    assert len(cells) == 1, f"expected one cell tagged {tag!r}, found {len(cells)}"
    return cells[0]


def output_data(cell, mime: str) -> list[str]:
    return [output["data"][mime] for output in cell.get("outputs", [])
            if mime in output.get("data", {})]


def test_walkthrough_is_committed_without_outputs():
    notebook = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None, (
                "clear the notebook's outputs before committing it")
    assert "WALKTHROUGH_MAX_STEPS" in "".join(tagged(notebook, "parameters")["source"])


@pytest.mark.slow
@pytest.mark.timeout(900)  # a minute of training, and cells that may each take 600 s
def test_walkthrough_runs_top_to_bottom(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    # The kernel inherits this environment: a 30-step model (or a minute) into a temporary
    # folder, searching greedily.
    monkeypatch.setenv("WALKTHROUGH_MAX_STEPS", "30")
    monkeypatch.setenv("WALKTHROUGH_MINUTES", "1")
    monkeypatch.setenv("WALKTHROUGH_BEAM", "1")  # greedy: a 30-step model babbles at length
    monkeypatch.setenv("WALKTHROUGH_OUTPUT_DIR", str(tmp_path))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    # "python3" is the kernel ipykernel provides in the same environment (sys.executable).
    client = nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # a cell's error raises CellExecutionError with its traceback

    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            assert output["output_type"] != "error", output
    for cell in notebook.cells:  # each table of the seeds' numbers says it agrees
        calls = cell.source.count("table(") - cell.source.count("def table(")
        if cell.cell_type == "code" and calls:
            text = "".join(output.get("text", "") for output in cell.outputs)
            assert text.count("✓") == calls, text
    assert output_data(tagged(notebook, "curve"), "image/png"), "no learning curve shown"
    assert output_data(tagged(notebook, "heatmap"), "image/png"), "no heatmap shown"
    pages = output_data(tagged(notebook, "explorer"), "text/html")
    assert len(pages) == 1 and pages[0].startswith('<div class="translator-explorer"><iframe ')
    assert "srcdoc=" in pages[0] and "explorer-data" in pages[0]
    assert "Content-Security-Policy" in pages[0]
    assert len(output_data(tagged(notebook, "edit-me"), "image/png")) == 2  # greedy and beam
    runs = [path for path in tmp_path.iterdir()
            if not path.is_symlink() and (path / "metrics.jsonl").is_file()]
    assert len(runs) == 1 and (runs[0] / "rajesh.html").is_file()
