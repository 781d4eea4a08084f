"""``POST /taskcell/api/export`` against a real server: the module written beside the notebook,
and every path, target and body a browser may send that must not reach a file outside the root;
a file taskcell did not write is replaced only with ``"overwrite": true``.

The server's root is pytest-jupyter's ``tmp_path / "root_dir"``; ``tmp_path`` itself is outside.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from tornado.httpclient import HTTPClientError

from taskcell.export import MARKER, TARGETS

from .test_requests import login

DEMO = Path(__file__).resolve().parents[2] / "demo_notebooks" / "04-export.ipynb"


def write_notebook(path: Path, *cells: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(new_notebook(cells=[new_code_cell(c) for c in cells]), path)
    return path


async def export(api, path: str, **body) -> dict:
    return await api("export", method="POST", body=json.dumps({"path": path, **body}))


async def refused(jp_fetch, body: str | dict, **kwargs) -> tuple[int, str]:
    if not isinstance(body, str):
        body = json.dumps(body)
    with pytest.raises(HTTPClientError) as info:
        await jp_fetch("taskcell", "api", "export", method="POST", body=body, **kwargs)
    reply = json.loads(info.value.response.body)
    assert set(reply) >= {"message", "reason"}, reply
    return info.value.code, reply["message"]


def files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


async def test_writes_the_demo_module_beside_the_notebook_and_answers_its_path(api, jp_root_dir):
    (jp_root_dir / "work").mkdir()
    shutil.copy(DEMO, jp_root_dir / "work" / DEMO.name)

    answer = await export(api, f"work/{DEMO.name}")

    assert answer == {
        "path": "work/04-export.py",
        "target": "dask",
        "replaced": False,
        "warnings": [],
    }
    module = jp_root_dir / "work" / "04-export.py"
    source = module.read_text()
    assert source.startswith(f"{MARKER}04-export.ipynb; ")
    compile(source, str(module), "exec")
    assert "def main(" in source
    assert files(jp_root_dir) == ["work", "work/04-export.ipynb", "work/04-export.py"]


@pytest.mark.parametrize("target", TARGETS)
async def test_every_target_writes_a_module_that_compiles(api, jp_root_dir, target):
    shutil.copy(DEMO, jp_root_dir / DEMO.name)
    answer = await export(api, DEMO.name, target=target)
    assert (answer["path"], answer["target"]) == ("04-export.py", target)
    compile((jp_root_dir / "04-export.py").read_text(), "04-export.py", "exec")


async def test_cells_kept_as_comments_come_back_as_warnings_naming_the_cell(api, jp_root_dir):
    write_notebook(jp_root_dir / "shell.ipynb", "x = 1", "%pip install numpy", "y = x + 1")
    answer = await export(api, "shell.ipynb")
    (warning,) = answer["warnings"]
    assert warning.startswith("taskcell: cell 2 (%pip install numpy): ")
    assert "left as a comment" in warning
    assert "# %pip install numpy" in (jp_root_dir / "shell.py").read_text()


async def test_a_symlink_inside_the_root_to_a_notebook_inside_it_is_followed(api, jp_root_dir):
    write_notebook(jp_root_dir / "real" / "nb.ipynb", "x = 1")
    (jp_root_dir / "alias").symlink_to(jp_root_dir / "real", target_is_directory=True)
    answer = await export(api, "alias/nb.ipynb")
    assert answer["path"] == "alias/nb.py"
    assert (jp_root_dir / "real" / "nb.py").is_file()


async def test_a_bad_task_line_is_a_400_naming_the_cell_and_nothing_is_written(
    jp_fetch, jp_root_dir
):
    write_notebook(jp_root_dir / "bad.ipynb", "x = 1", "%%task --cpu lots\ny = x")
    code, message = await refused(jp_fetch, {"path": "bad.ipynb"})
    assert code == 400
    assert message.startswith("cannot export bad.ipynb: cell 2 (%%task --cpu lots): --cpu")
    assert files(jp_root_dir) == ["bad.ipynb"]


async def test_a_failed_export_leaves_an_earlier_module_as_it_was(jp_fetch, jp_root_dir):
    write_notebook(jp_root_dir / "bad.ipynb", "def f(:\n    pass")
    (jp_root_dir / "bad.py").write_text("# an earlier export\n")
    code, message = await refused(jp_fetch, {"path": "bad.ipynb"})
    assert code == 400
    assert "cell 1 (def f(:): invalid syntax" in message
    assert (jp_root_dir / "bad.py").read_text() == "# an earlier export\n"
    assert files(jp_root_dir) == ["bad.ipynb", "bad.py"]


async def test_a_file_that_is_not_a_notebook_inside_is_a_400(jp_fetch, jp_root_dir):
    (jp_root_dir / "broken.ipynb").write_text("{ not json")
    code, message = await refused(jp_fetch, {"path": "broken.ipynb"})
    assert code == 400
    assert message.startswith("cannot export broken.ipynb: ")
    assert files(jp_root_dir) == ["broken.ipynb"]


@pytest.mark.parametrize(
    "path",
    [
        "../outside.ipynb",
        "sub/../../outside.ipynb",
        "/etc/passwd",
        "/etc/../tmp/x.ipynb",
        "link-out.ipynb",
        "dir-out/outside.ipynb",
        "module-out.ipynb",
    ],
    ids=[
        "parent",
        "parent via a folder",
        "absolute",
        "absolute notebook",
        "symlink to a notebook outside",
        "symlinked folder outside",
        "module path a symlink outside",
    ],
)
async def test_a_path_outside_the_root_is_refused_and_nothing_is_written(
    jp_fetch, jp_root_dir, tmp_path, path
):
    outside = write_notebook(tmp_path / "outside.ipynb", "x = 1")
    (jp_root_dir / "sub").mkdir()
    (jp_root_dir / "link-out.ipynb").symlink_to(outside)
    (jp_root_dir / "dir-out").symlink_to(tmp_path, target_is_directory=True)
    write_notebook(jp_root_dir / "module-out.ipynb", "x = 1")
    (tmp_path / "victim.py").write_text("# not ours\n")
    (jp_root_dir / "module-out.py").symlink_to(tmp_path / "victim.py")
    before_root, before_outside = files(jp_root_dir), files(tmp_path)

    code, message = await refused(jp_fetch, {"path": path})

    assert code == 400
    assert message.startswith("'path' must"), message
    assert repr(path) in message
    assert not (tmp_path / "outside.py").exists()
    assert (tmp_path / "victim.py").read_text() == "# not ours\n"
    assert (files(jp_root_dir), files(tmp_path)) == (before_root, before_outside)


async def test_an_absolute_path_is_refused_even_inside_the_root(jp_fetch, jp_root_dir):
    notebook = write_notebook(jp_root_dir / "nb.ipynb", "x = 1")
    code, message = await refused(jp_fetch, {"path": str(notebook)})
    assert code == 400
    assert "must be relative to the server's root" in message


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("notes.txt", "'path' must name a notebook (.ipynb), got 'notes.txt'"),
        ("script.py", "'path' must name a notebook (.ipynb), got 'script.py'"),
        ("", "'path' must be the notebook's path relative to the server's root, got ''"),
        ("/", "'path' must be the notebook's path relative to the server's root, got '/'"),
        (3, "'path' must be the notebook's path relative to the server's root, got 3"),
        (None, "'path' must be the notebook's path relative to the server's root, got None"),
        ("a\0.ipynb", "'path' must not contain a NUL character, got 'a\\x00.ipynb'"),
    ],
    ids=["text file", "python file", "empty", "root", "number", "null", "NUL"],
)
async def test_a_path_that_is_not_a_notebook_is_a_400(jp_fetch, jp_root_dir, path, expected):
    (jp_root_dir / "notes.txt").write_text("hello")
    (jp_root_dir / "script.py").write_text("x = 1")
    assert await refused(jp_fetch, {"path": path}) == (400, expected)


async def test_a_missing_notebook_is_a_404(jp_fetch, jp_root_dir):
    code, message = await refused(jp_fetch, {"path": "sub/nope.ipynb"})
    assert (code, message) == (404, "no notebook at 'sub/nope.ipynb'")
    assert files(jp_root_dir) == []


async def test_a_hidden_notebook_is_refused_as_the_contents_api_does(jp_fetch, jp_root_dir):
    write_notebook(jp_root_dir / ".secret" / "nb.ipynb", "x = 1")
    code, message = await refused(jp_fetch, {"path": ".secret/nb.ipynb"})
    assert code == 400
    assert "is hidden" in message
    assert not (jp_root_dir / ".secret" / "nb.py").exists()


@pytest.mark.parametrize("target", ["airflow", "", None, ["dask"]], ids=repr)
async def test_an_unknown_target_is_a_400_naming_the_known_ones(jp_fetch, jp_root_dir, target):
    write_notebook(jp_root_dir / "nb.ipynb", "x = 1")
    code, message = await refused(jp_fetch, {"path": "nb.ipynb", "target": target})
    assert (code, message) == (
        400,
        f"'target' must be one of 'dask', 'flyte', 'latch', got {target!r}",
    )
    assert files(jp_root_dir) == ["nb.ipynb"]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("{", "the request body must be JSON"),
        ('["nb.ipynb"]', "the request body must be a JSON object, got list"),
        ("", "the request body must be a JSON object, got NoneType"),
    ],
    ids=["truncated", "array", "empty"],
)
async def test_a_malformed_body_is_a_400(jp_fetch, jp_root_dir, body, expected):
    write_notebook(jp_root_dir / "nb.ipynb", "x = 1")
    code, message = await refused(jp_fetch, body)
    assert code == 400
    assert message.startswith(expected)


@pytest.mark.parametrize("authorization", ["", "token not-the-token"], ids=["none", "wrong"])
async def test_without_the_token_it_is_refused_and_writes_nothing(
    jp_fetch, jp_root_dir, authorization
):
    write_notebook(jp_root_dir / "nb.ipynb", "x = 1")
    with pytest.raises(HTTPClientError) as info:
        await jp_fetch(
            "taskcell",
            "api",
            "export",
            method="POST",
            body=json.dumps({"path": "nb.ipynb"}),
            headers={"Authorization": authorization},
        )
    assert info.value.code == 403
    assert files(jp_root_dir) == ["nb.ipynb"]


async def test_a_cookie_login_must_send_the_xsrf_token(jp_fetch, jp_serverapp, jp_root_dir):
    write_notebook(jp_root_dir / "nb.ipynb", "x = 1")
    cookies = await login(jp_fetch, jp_serverapp.identity_provider.token)
    cookie = "; ".join(f"{k}={v}" for k, v in cookies.items())
    body = json.dumps({"path": "nb.ipynb"})
    with pytest.raises(HTTPClientError) as info:
        await jp_fetch(
            "taskcell",
            "api",
            "export",
            method="POST",
            body=body,
            headers={"Authorization": "", "Cookie": cookie},
        )
    assert info.value.code == 403
    assert files(jp_root_dir) == ["nb.ipynb"]

    answer = await jp_fetch(
        "taskcell",
        "api",
        "export",
        method="POST",
        body=body,
        headers={"Authorization": "", "Cookie": cookie, "X-XSRFToken": cookies["_xsrf"]},
    )
    assert json.loads(answer.body)["path"] == "nb.py"


# -- replacing a file, or not ---------------------------------------------------------------

HAND_WRITTEN = b"# my own workflow\r\nimport os\n\xff not even utf-8\n"


async def test_a_file_taskcell_did_not_write_is_a_409_and_left_byte_for_byte(jp_fetch, jp_root_dir):
    write_notebook(jp_root_dir / "sub" / "nb.ipynb", "x = 1", "%%task\ny = x")
    (jp_root_dir / "sub" / "nb.py").write_bytes(HAND_WRITTEN)

    code, message = await refused(jp_fetch, {"path": "sub/nb.ipynb"})

    assert (code, message) == (
        409,
        "'sub/nb.py' exists and was not written by taskcell; "
        'send "overwrite": true to replace it',
    )
    assert (jp_root_dir / "sub" / "nb.py").read_bytes() == HAND_WRITTEN
    assert files(jp_root_dir) == ["sub", "sub/nb.ipynb", "sub/nb.py"]


async def test_overwrite_true_replaces_it_and_says_so(api, jp_root_dir):
    write_notebook(jp_root_dir / "nb.ipynb", "x = 1", "%%task\ny = x")
    (jp_root_dir / "nb.py").write_bytes(HAND_WRITTEN)

    answer = await export(api, "nb.ipynb", overwrite=True)

    assert answer == {"path": "nb.py", "target": "dask", "replaced": True, "warnings": []}
    source = (jp_root_dir / "nb.py").read_text()
    assert source.startswith(f"{MARKER}nb.ipynb; ") and "def compute_y(x):" in source
    assert files(jp_root_dir) == ["nb.ipynb", "nb.py"]


async def test_a_module_taskcell_wrote_is_replaced_without_overwrite(api, jp_root_dir):
    write_notebook(jp_root_dir / "nb.ipynb", "x = 1", "%%task\ny = x")
    assert (await export(api, "nb.ipynb"))["replaced"] is False
    write_notebook(jp_root_dir / "nb.ipynb", "x = 1", "%%task\nz = x")

    answer = await export(api, "nb.ipynb", target="flyte")

    assert (answer["replaced"], answer["target"]) == (True, "flyte")
    assert "import flyte" in (jp_root_dir / "nb.py").read_text()


async def test_a_symlink_to_a_hand_written_file_is_refused_too(jp_fetch, jp_root_dir):
    write_notebook(jp_root_dir / "nb.ipynb", "x = 1")
    (jp_root_dir / "mine.py").write_bytes(HAND_WRITTEN)
    (jp_root_dir / "nb.py").symlink_to(jp_root_dir / "mine.py")
    code, _ = await refused(jp_fetch, {"path": "nb.ipynb"})
    assert code == 409
    assert (jp_root_dir / "mine.py").read_bytes() == HAND_WRITTEN
    assert (jp_root_dir / "nb.py").is_symlink()


@pytest.mark.parametrize("overwrite", [False, True], ids=["plain", "overwrite"])
@pytest.mark.parametrize("kind", ["directory", "fifo"])
async def test_a_directory_or_fifo_in_the_modules_place_is_a_400(
    jp_fetch, jp_root_dir, kind, overwrite
):
    write_notebook(jp_root_dir / "nb.ipynb", "x = 1")
    if kind == "directory":
        (jp_root_dir / "nb.py").mkdir()
        (jp_root_dir / "nb.py" / "kept.txt").write_text("kept")
    else:
        os.mkfifo(jp_root_dir / "nb.py")

    code, message = await refused(jp_fetch, {"path": "nb.ipynb", "overwrite": overwrite})

    assert (code, message) == (
        400,
        "cannot write the module 'nb.py': a directory or another non-file is in its place; "
        "rename or move it",
    )
    expected = ["nb.ipynb", "nb.py"] + (["nb.py/kept.txt"] if kind == "directory" else [])
    assert files(jp_root_dir) == expected


@pytest.mark.parametrize(
    ("overwrite", "shown"),
    [("yes", "'yes'"), (1, "1"), (None, "None"), ([], "[]")],
    ids=["text", "number", "null", "list"],
)
async def test_overwrite_must_be_a_boolean(jp_fetch, jp_root_dir, overwrite, shown):
    write_notebook(jp_root_dir / "nb.ipynb", "x = 1")
    (jp_root_dir / "nb.py").write_bytes(HAND_WRITTEN)
    code, message = await refused(jp_fetch, {"path": "nb.ipynb", "overwrite": overwrite})
    assert (code, message) == (400, f"'overwrite' must be true or false, got {shown}")
    assert (jp_root_dir / "nb.py").read_bytes() == HAND_WRITTEN


async def test_an_unknown_field_is_a_400_naming_it(jp_fetch, jp_root_dir):
    write_notebook(jp_root_dir / "nb.ipynb", "x = 1")
    code, message = await refused(jp_fetch, {"path": "nb.ipynb", "ovewrite": True})
    assert (code, message) == (
        400,
        "unknown field(s) 'ovewrite'; the export takes 'path', 'target' and 'overwrite'",
    )
    assert files(jp_root_dir) == ["nb.ipynb"]


# -- what a notebook or a path may hold ------------------------------------------------------


@pytest.mark.parametrize(
    ("cell", "words"),
    [
        ("%%task --gpu ²\ny = x", "cell 2 (%%task --gpu ²): gpu="),
        ("%%task --memory 1e99999999\ny = x", "cell 2 (%%task --memory 1e99999999): memory="),
        ("%%task --cpu 1e400\ny = x", "cell 2 (%%task --cpu 1e400): cpu="),
        ("y = " + "-" * 100_000 + "x", "nested too deeply"),
        ("y = x" + ".a" * 100_000, "nested too deeply"),
    ],
    ids=["superscript gpu", "huge memory", "huge cpu", "nested minus", "long attribute chain"],
)
async def test_a_hostile_cell_is_a_400_and_nothing_is_written(jp_fetch, jp_root_dir, cell, words):
    write_notebook(jp_root_dir / "nb.ipynb", "x = 1", cell)
    code, message = await refused(jp_fetch, {"path": "nb.ipynb"})
    assert code == 400
    assert message.startswith("cannot export nb.ipynb: ") and words in message
    assert files(jp_root_dir) == ["nb.ipynb"]


async def test_a_notebook_of_deeply_nested_json_is_a_400(jp_fetch, jp_root_dir):
    (jp_root_dir / "deep.ipynb").write_text("[" * 100_000 + "]" * 100_000)
    code, message = await refused(jp_fetch, {"path": "deep.ipynb"})
    assert code == 400
    assert "nested too deeply" in message
    assert files(jp_root_dir) == ["deep.ipynb"]


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("a" * 300 + ".ipynb", "cannot name a file here (File name too long)"),
        ("a/" * 3000 + "nb.ipynb", "cannot name a file here (File name too long)"),
        ("x\ud800.ipynb", "no lone surrogates"),
        ("loop.ipynb", "symlink loop"),
        ("nb.ipynb/inner.ipynb", "no notebook at 'nb.ipynb/inner.ipynb'"),
    ],
    ids=["name too long", "path too long", "lone surrogate", "symlink loop", "file as folder"],
)
async def test_a_path_no_file_can_have_is_a_4xx(jp_fetch, jp_root_dir, path, words):
    write_notebook(jp_root_dir / "nb.ipynb", "x = 1")
    (jp_root_dir / "loop.ipynb").symlink_to(jp_root_dir / "loop.ipynb")
    code, message = await refused(jp_fetch, {"path": path})
    assert code in (400, 404)
    assert words in message
    assert files(jp_root_dir) == ["loop.ipynb", "nb.ipynb"]
