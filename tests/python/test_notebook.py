"""Notebooks: a Snapshot's page inline (sandboxed) and its summary as text, a
flamegraph as SVG, the %%memsight cell magic; and a notebook run headlessly."""

from __future__ import annotations

import html
import os

import pytest

import memsight
from memsight._magics import MagicUsageError
from memsight._record_magic import NO_CUDA, parse, run_memsight

pytestmark = pytest.mark.usefixtures("core")


def test_the_page_inline_is_a_sandboxed_iframe(data_dir):
    snap = memsight.load(data_dir / "oom.pickle")
    out = snap._repr_html_()
    assert out.startswith("<iframe srcdoc=\"") and 'sandbox="allow-scripts"' in out
    assert "allow-same-origin" not in out
    srcdoc = out.split('srcdoc="', 1)[1].split('" sandbox=', 1)[0]
    assert '"' not in srcdoc and html.unescape(srcdoc) == snap.html()


def test_a_big_page_gets_a_note_and_the_summary(data_dir, monkeypatch):
    monkeypatch.setenv("MEMSIGHT_INLINE_PAGE_LIMIT", "64K")
    snap = memsight.load(data_dir / "oom.pickle")
    out = snap._repr_html_()
    assert "<iframe" not in out and "over the 0.1 MiB shown inline" in out
    assert "snap.to_html(&#x27;oom.pickle.html&#x27;)" in out
    assert html.escape(snap.summary_text().splitlines()[0]) in out


def test_the_summary_is_the_pretty_text(data_dir):
    pretty = pytest.importorskip("IPython.lib.pretty")
    snap = memsight.load(data_dir / "oom.pickle")
    assert pretty.pretty(snap) == snap.summary_text()
    checked = memsight.load(data_dir / "oom.pickle", trace=False)
    assert pretty.pretty(checked) == repr(checked) and checked._repr_html_() is None


def test_folded_stacks_show_as_their_flamegraph(data_dir):
    stacks = memsight.load(data_dir / "oom.pickle").memory()
    svg = stacks._repr_svg_()
    assert "<svg" in svg and svg == stacks.svg()
    assert memsight.FoldedStacks("")._repr_svg_() is None


def test_the_cell_magic_records_and_shows(fake_torch):
    shown, said, ns = [], [], {}
    snap = run_memsight("-o s", "x = 41 + 1", ns, None, show=shown.append, say=said.append)
    assert ns["x"] == 42 and ns["s"] is snap and shown == [snap]
    assert said == [snap.summary_text()] and snap.trace_entry_count > 0
    assert fake_torch.enabled is None  # recording stopped after the cell


def test_the_cells_exception_goes_on_after_the_show(fake_torch):
    shown, said, ns = [], [], {}
    with pytest.raises(ZeroDivisionError):
        run_memsight("-q", "y = 1\n1 / 0", ns, None, show=shown.append, say=said.append)
    assert ns["y"] == 1 and isinstance(ns["_memsight"], memsight.Snapshot) and shown == [] and len(said) == 1


def test_without_cuda_the_cell_runs_and_the_magic_says_so(no_torch):
    said, ns = [], {}
    assert run_memsight("", "z = 3", ns, None, show=pytest.fail, say=said.append) is None
    assert ns["z"] == 3 and said == [NO_CUDA]


@pytest.mark.parametrize("line, message", [("-o 1x", "variable name"), ("-n 0", "positive"),
                                           ("--bogus", "unrecognized"), ("-o 'a", "quotation")])
def test_bad_magic_lines(line, message):
    with pytest.raises(MagicUsageError, match=message):
        parse(line)


def test_a_notebook_run_headlessly(data_dir, tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    from memsight_testlib import PYTHON_DIR

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(PYTHON_DIR), os.environ.get("PYTHONPATH", "")]))
    cells = ["%load_ext memsight", "%%memsight\nx = 41 + 1", "x",
             f"import memsight\nsnap = memsight.load({str(data_dir / 'oom.pickle')!r})\nsnap", "snap.memory()"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbclient.NotebookClient(nb, timeout=60, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    out = [c.outputs for c in nb.cells]
    cuda = _kernel_has_cuda()
    if not cuda:
        assert out[1][0]["text"].strip() == NO_CUDA
    assert out[2][0]["data"]["text/plain"] == "42"
    page = out[3][0]["data"]
    assert page["text/html"].startswith("<iframe srcdoc=") and 'sandbox="allow-scripts"' in page["text/html"]
    assert page["text/plain"] == memsight.load(data_dir / "oom.pickle").summary_text()
    assert "<svg" in out[4][0]["data"]["image/svg+xml"]


def _kernel_has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(getattr(torch, "__memsight_fake__", False) is False and torch.cuda.is_available())
