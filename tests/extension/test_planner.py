"""``/taskcell/api/planner`` against a real server: profiles, suggestions with and without a
cluster's live workers, and inputs the planner must refuse from a browser."""

from __future__ import annotations

import json

import pytest
from tornado.httpclient import HTTPClientError

from taskcell.extension.clusters import cluster_id


async def post(api, body: dict) -> dict:
    return await api("planner", method="POST", body=json.dumps(body))


async def refused(jp_fetch, body: dict) -> tuple[int, str]:
    with pytest.raises(HTTPClientError) as info:
        await jp_fetch("taskcell", "api", "planner", method="POST", body=json.dumps(body))
    return info.value.code, json.loads(info.value.response.body)["message"]


async def test_lists_the_profiles_and_the_default(api):
    from taskcell import planner

    choices = await api("planner")
    assert [p["name"] for p in choices["profiles"]] == planner.profile_names()
    assert choices["default_profile"] == planner.DEFAULT_PROFILE
    assert all(p["description"] for p in choices["profiles"])


async def test_suggests_a_preset_and_its_task_line_without_a_cluster(api):
    from taskcell import planner

    answer = await post(api, {"size": "1 GiB"})
    expected = planner.suggest(2**30, "default", []).to_dict()
    assert answer == expected
    assert answer["preset"] and answer["line"].startswith(f"%%task {answer['preset']}")
    assert answer["workers"] == []


@pytest.mark.parametrize(
    "size", ["1 GiB", "1Gi", "1073741824", 1073741824, 1073741824.0, " 1 GiB "], ids=repr
)
async def test_reads_a_size_in_every_form_people_type(api, size):
    assert (await post(api, {"size": size}))["size"] == 2**30


async def test_says_when_nothing_fits(api):
    answer = await post(api, {"size": "1 PiB", "profile": "default"})
    assert answer["preset"] is None
    assert answer["fits"] is False
    assert "No preset fits" in answer["message"]


async def test_an_unknown_profile_is_a_400_naming_the_known_ones(jp_fetch):
    code, message = await refused(jp_fetch, {"size": "1 GiB", "profile": "nope"})
    assert code == 400
    assert "'nope' is not a known profile" in message
    assert "gpu-training" in message


@pytest.mark.parametrize(
    "size",
    ["/etc/*", "~/.ssh/*", "/", "**/*.py", "lots"],
    ids=["glob", "home glob", "root", "recursive", "word"],
)
async def test_without_a_notebook_a_size_is_a_quantity_never_a_path_on_the_server(jp_fetch, size):
    code, message = await refused(jp_fetch, {"size": size})
    assert code == 400
    assert message == (
        f'\'size\' must be a quantity such as "12 GiB", "500M" or 500e6, got {size!r} '
        "(files are read beside a notebook: ask from one)"
    )


@pytest.mark.parametrize(
    ("size", "words"),
    [
        ("12Gb", "got '12Gb' ('Gb' means bits, not bytes); did you mean \"12G\" or \"12Gi\"?"),
        ("12 parsecs", "got '12 parsecs'"),
    ],
)
async def test_a_mistyped_amount_gets_the_spec_layers_own_message(
    jp_fetch, jp_root_dir, size, words
):
    (jp_root_dir / "nb.ipynb").write_text("{}")
    for body in ({"size": size}, {"size": size, "notebook": "nb.ipynb"}):
        code, message = await refused(jp_fetch, body)
        assert code == 400 and words in message, message


def files(root, sizes: dict[str, int]) -> None:
    for name, size in sizes.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)


async def test_globs_are_read_beside_the_notebook_as_the_panel_reads_them(api, jp_root_dir):
    from taskcell.planner.sizing import input_size

    files(
        jp_root_dir,
        {
            "project/nb.ipynb": 2,
            "project/data/a.csv": 1000,
            "project/data/b.csv": 3000,
            "project/data/sub/c.csv": 5000,
            "project/data/.hidden.csv": 7000,
            "elsewhere.csv": 11000,
        },
    )
    for size, expected in [
        ("data/*.csv", 4000),
        ("data", 9000),  # a folder: its files, as the panel counts them
        ("data/**/*.csv", 9000),
        ("data/a.csv, data/b.csv", 4000),
        ("../elsewhere.csv", 11000),  # inside the server's root: read
    ]:
        answer = await post(api, {"size": size, "notebook": "project/nb.ipynb"})
        assert answer["size"] == expected, size
    folder = jp_root_dir / "project"
    assert input_size([folder / "data" / "a.csv", folder / "data" / "b.csv"]) == 4000


@pytest.mark.parametrize(
    ("size", "code", "words"),
    [
        ("/etc/*", 400, "relative to the notebook's folder, got '/etc/*'"),
        ("~/.ssh/*", 400, "relative to the notebook's folder"),
        ("../../outside.csv", 400, "matches no file beside nb.ipynb"),
        ("data/.hidden.csv", 400, "matches no file beside nb.ipynb"),
        ("nothing/*.csv", 400, "matches no file beside nb.ipynb"),
    ],
    ids=["absolute", "home", "outside the root", "hidden", "no match"],
)
async def test_files_outside_the_root_or_hidden_are_never_read(
    jp_fetch, jp_root_dir, size, code, words
):
    files(jp_root_dir, {"project/nb.ipynb": 2, "project/data/.hidden.csv": 7000})
    files(jp_root_dir.parent, {"outside.csv": 5})
    got, message = await refused(jp_fetch, {"size": size, "notebook": "project/nb.ipynb"})
    assert (got, words in message) == (code, True), message


async def test_a_notebook_that_is_not_there_or_outside_is_refused(jp_fetch, jp_root_dir):
    code, message = await refused(jp_fetch, {"size": "*.csv", "notebook": "../nb.ipynb"})
    assert code == 400 and "'notebook' must lie inside the server's root" in message
    code, _ = await refused(jp_fetch, {"size": "*.csv", "notebook": "missing.ipynb"})
    assert code == 404


@pytest.fixture(scope="module")
def two_workers(module_dask):
    module_dask.worker(
        "--nthreads", "2", "--memory-limit", "8GiB", "--resources", "GPU=2", name="gpu-box"
    )
    module_dask.worker("--memory-limit", "2GiB", name="small-box")
    return module_dask


@pytest.mark.slow
class TestWithACluster:
    @pytest.fixture
    def taskcell_config(self, two_workers) -> dict:
        return {"scheduler_addresses": [two_workers.address]}

    async def test_says_which_live_workers_can_run_it_and_why_not(self, api, wait_for, two_workers):
        cid = cluster_id(two_workers.address)
        await wait_for(cid, lambda s: s["snapshot"] and len(s["snapshot"]["workers"]) == 2)
        answer = await post(api, {"size": "1 MiB", "profile": "light", "cluster": cid})
        assert answer["preset"] == "small_task"
        verdicts = {w["name"]: w for w in answer["workers"]}
        assert set(verdicts) == {"gpu-box", "small-box"}
        assert verdicts["gpu-box"]["able"] is True
        assert verdicts["small-box"]["able"] is False
        assert "asks threads=2; this worker has 1" in verdicts["small-box"]["reason"]
        assert "asks memory limit=" in verdicts["small-box"]["reason"]

    async def test_a_first_request_waits_for_the_cluster_rather_than_answer_without_it(
        self, api, two_workers
    ):
        # No snapshot was asked for yet: the planner request itself opens the subscription.
        cid = cluster_id(two_workers.address)
        answer = await post(api, {"size": "1 MiB", "profile": "light", "cluster": cid})
        assert len(answer["workers"]) == 2
