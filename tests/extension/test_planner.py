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
    assert answer == planner.suggest(2**30, "default", []).to_dict()
    assert answer["preset"] == "small_task"
    assert answer["line"].startswith("%%task small_task")
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
    ["/etc/*", "~/.ssh/*", "/", "**/*.py", "lots", "12 parsecs"],
    ids=["glob", "home glob", "root", "recursive", "word", "unit"],
)
async def test_a_size_must_be_a_quantity_never_a_path_on_the_server(jp_fetch, size):
    code, message = await refused(jp_fetch, {"size": size})
    assert code == 400
    assert message == (
        f'\'size\' must be a quantity such as "12 GiB", "500M" or 500e6, got {size!r}'
    )


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
