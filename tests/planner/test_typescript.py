"""The sidebar's snapshot types are generated from the Python schema, and kept so."""

from __future__ import annotations

import pytest

from taskcell.planner import typescript


def test_snapshot_ts_is_generated_from_the_current_schema(capsys):
    assert typescript.main(["--check"]) == 0, capsys.readouterr().err


def test_the_output_follows_the_python_records():
    text = typescript.typescript()
    assert "export const TASKS_PER_WORKER = 5;" in text
    assert "export type TaskState = 'running' | 'assigned' | 'queued';" in text
    assert "  worker: string | null;" in text and "  tasks: ITaskInfo[];" in text
    assert "export const BYTE_RESOURCES: readonly string[] = ['DISK', 'MEMORY', 'SHM'];" in text
    assert "None" not in text  # Python's None is TypeScript's null, in the comments too


def test_an_annotation_it_cannot_translate_is_refused(tmp_path, monkeypatch):
    module = tmp_path / "odd_schema.py"
    module.write_text("from typing import TypedDict\n\nclass Odd(TypedDict):\n    x: set[int]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(TypeError, match="'set\\[int\\]'"):
        typescript.typescript(["odd_schema"])


def test_check_says_which_file_is_stale(tmp_path, capsys):
    stale = tmp_path / "snapshot.ts"
    stale.write_text("// old\n")
    assert typescript.main(["--check", str(stale)]) == 1
    assert "is stale" in capsys.readouterr().err
    assert typescript.main([str(stale)]) == 0
    assert stale.read_text() == typescript.typescript()
