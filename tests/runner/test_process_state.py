"""Process-wide state carried with a cell: captured, set elsewhere, and its changes found."""

from __future__ import annotations

import os
import random
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from taskcell.runner import process_state


@pytest.fixture
def restore():
    """Put this test process's random generators and warnings back as they were."""
    saved = process_state.capture()
    yield
    process_state.apply(saved)


def by_name(state):
    return {carrier.name: value for carrier, value in state}


def test_a_seeded_generator_gives_the_numbers_of_one_process(restore):
    random.seed(3)
    np.random.seed(4)
    sent = process_state.capture()
    in_cell = (random.random(), np.random.rand())  # the cell's process draws
    back = process_state.changed(sent)
    assert {"random", "numpy.random"} <= set(by_name(back))
    process_state.apply(sent)  # the notebook, as it was while the cell ran
    process_state.apply(back)  # the cell succeeded: its generators come back advanced
    after = (random.random(), np.random.rand())
    random.seed(3)
    np.random.seed(4)
    assert (in_cell, after) == (
        (random.random(), np.random.rand()),
        (random.random(), np.random.rand()),
    )


def test_library_settings_travel(restore):
    import pandas as pd

    # What this process set before (importing dask.dataframe sets compute.use_numexpr), and 7.
    before = by_name(process_state.capture())["pandas options"]
    with pd.option_context("display.max_rows", 7):
        sent = process_state.capture()
    assert by_name(sent)["pandas options"] == {**before, "display.max_rows": 7}
    process_state.apply(sent)
    try:
        assert pd.get_option("display.max_rows") == 7
    finally:
        pd.reset_option("display.max_rows")


def test_warnings_filters_travel(restore):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        sent = process_state.capture()
    with warnings.catch_warnings():
        process_state.apply(sent)
        with pytest.raises(UserWarning):
            warnings.warn("now an error", UserWarning, stacklevel=1)


def test_a_carrier_from_another_process_is_compared_too():
    box = {"level": 1}
    carrier = process_state.Carrier(
        name="box", module="random", get=lambda: box["level"], set=box.__setitem__
    )
    sent = [(carrier, 1)]
    assert all(c.name != "box" for c, _ in process_state.changed(sent))
    box["level"] = 2
    assert (carrier, 2) in process_state.changed(sent)


def test_logging_set_up_by_basicconfig_prints_where_the_cell_prints(restore, capsys):
    import logging
    import sys

    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    try:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s|%(message)s"))
        root.handlers[:] = [handler]
        root.setLevel(logging.INFO)
        sent = process_state.capture()
        root.handlers[:] = []
        root.setLevel(logging.WARNING)
        process_state.apply(sent)  # as the cell's process does, its own streams in place
        logging.getLogger("cell").info("from the cell")
        assert "INFO|from the cell" in capsys.readouterr().err
        assert all(c.name != "logging" for c, _ in process_state.changed(sent))
    finally:
        root.setLevel(saved[0])
        root.handlers[:] = saved[1]


def test_numpy_print_options_travel(restore):
    with np.printoptions(precision=2):
        sent = process_state.capture()
    process_state.apply(sent)
    try:
        assert repr(np.array([1 / 3])) == "array([0.33])"
    finally:
        np.set_printoptions(precision=8)


def test_the_notebooks_import_paths_go_in_and_not_back(monkeypatch, tmp_path):
    import sys

    monkeypatch.setattr(sys, "path", [*sys.path, str(tmp_path)])
    sent = process_state.capture()
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(tmp_path)])
    process_state.apply(sent)
    assert str(tmp_path) in sys.path
    sys.path.append("/somewhere/of/the/cells/own")
    assert all(c.name != "sys.path" for c, _ in process_state.changed(sent))


def test_the_working_directory_goes_in_and_a_change_comes_back(monkeypatch, tmp_path):
    notebook, elsewhere = tmp_path / "notebook", tmp_path / "worker"
    (notebook / "sub").mkdir(parents=True)
    elsewhere.mkdir()
    monkeypatch.chdir(notebook)
    sent = process_state.capture()
    monkeypatch.chdir(elsewhere)  # the cell's process, started somewhere else
    process_state.apply(sent)
    assert Path.cwd() == notebook
    assert process_state.changed(sent) == []
    os.chdir("sub")
    assert by_name(process_state.changed(sent))["working directory"] == str(notebook / "sub")


def test_a_worker_without_the_notebooks_directory_runs_where_it_is(monkeypatch, tmp_path):
    monkeypatch.setattr(process_state, "_cwd_elsewhere", None)  # put back after the test
    monkeypatch.chdir(tmp_path)
    sent = [
        (c, "/no/such/notebook/dir" if c.name == "working directory" else v)
        for c, v in process_state.capture()
    ]
    process_state.apply(sent)
    assert Path.cwd() == tmp_path
    assert process_state.changed(sent) == []  # the notebook keeps its own


def test_a_removed_working_directory_is_carried_as_none(monkeypatch, tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    monkeypatch.setattr(process_state, "_cwd_elsewhere", None)
    gone.rmdir()
    sent = process_state.capture()  # a notebook whose directory was removed still runs cells
    assert by_name(sent)["working directory"] is None
    monkeypatch.chdir(tmp_path)  # the cell's process
    process_state.apply(sent)
    assert Path.cwd() == tmp_path
    assert process_state.changed(sent) == []


def test_registered_is_what_capture_carries_in_order(monkeypatch):
    monkeypatch.setattr(process_state, "_CARRIERS", dict(process_state._CARRIERS))
    process_state.register("answer", "os", lambda: 42, lambda value: None)
    assert [c.name for c in process_state.registered()][-1] == "answer"
    captured = [c.name for c, _ in process_state.capture()]
    assert captured == [c.name for c in process_state.registered() if c.module in sys.modules]
