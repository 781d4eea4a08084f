"""A request reaches workers whatever case each used for a resource's name (issue 21).

Dask lower-cases resources set from the environment and matches names exactly, so one worker
started with ``--resources gpu=1`` and another with ``GPU=1`` serve no common request by
themselves. The rule is checked on tiny inputs, then with real worker processes.
"""

from __future__ import annotations

import pytest

from taskcell.cluster.mapping import WorkerCapacity, aliases, dask_resources, spellings
from taskcell.spec import Resources


def worker(address: str, **resources: float) -> WorkerCapacity:
    return WorkerCapacity(
        address=address, name=address, nthreads=2, memory_limit=2**33, resources=resources
    )


SPELLINGS = [
    ([worker("a", gpu=1)], "GPU", {"gpu": "gpu"}),
    ([worker("a", gpu=1), worker("b", GPU=1)], "GPU", {"gpu": "GPU"}),
    ([worker("a", gpu=1), worker("b", gpu=1), worker("c", Gpu=1)], "GPU", {"gpu": "gpu"}),
    ([worker("a", gpu=1), worker("b", Gpu=1)], "GPU", {"gpu": "Gpu"}),
    ([worker("a", Process=1), worker("b", process=1)], "process", {"process": "process"}),
    ([worker("a", CPU=2)], "GPU", {}),
]


@pytest.mark.parametrize(
    ("workers", "name", "expected"),
    SPELLINGS,
    ids=["one-spelling", "ours-wins", "most-common", "tie-sorted", "extra-as-asked", "absent"],
)
def test_the_spelling_requested(workers, name, expected):
    assert spellings([name], workers) == expected


def test_workers_that_spell_it_otherwise_are_the_ones_to_alias():
    workers = [worker("a", gpu=1, MEMORY=2**33), worker("b", GPU=2), worker("c", CPU=4)]
    resources = dask_resources(Resources(gpu=1, memory="1Gi"), workers)
    assert resources == {"GPU": 1.0, "MEMORY": 2.0**30}
    assert aliases(resources, workers) == {"a": {"GPU": 1.0}}


@pytest.mark.slow
def test_workers_spelling_gpu_either_way_both_run_gpu_requests(dask_processes, tmp_path):
    from distributed import Client

    from taskcell.cluster.submit import plan, submit

    dask_processes.worker("--resources", "gpu=1", name="lower")
    dask_processes.worker("--resources", "GPU=1", name="upper")
    dask_processes.wait_for_workers(2)

    def meet(folder: str) -> str:
        """Say where it runs, then wait (at most a minute) for a second task to run too."""
        import os
        import pathlib
        import time

        from distributed import get_worker

        name = str(get_worker().name)
        (pathlib.Path(folder) / name).touch()
        deadline = time.monotonic() + 60
        while len(os.listdir(folder)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        return name

    with Client(dask_processes.address, set_as_default=False) as client:
        placement = plan(Resources(gpu=1), client)
        assert {w.name for w in placement.workers} == {"lower", "upper"}
        assert placement.resources == {"GPU": 1.0}
        futures = [
            submit(client, meet, str(tmp_path), request=Resources(gpu=1), name=f"meet-{i}")
            for i in range(2)
        ]
        assert sorted(client.gather(futures)) == ["lower", "upper"]
        resources = {w["name"]: w["resources"] for w in client.scheduler_info()["workers"].values()}
        assert resources == {"lower": {"gpu": 1, "GPU": 1}, "upper": {"GPU": 1}}
