"""Pools as configured: shapes, limits, the pool a request goes to, and how a worker is started."""

from __future__ import annotations

import sys

import dask
import pytest

from taskcell.cluster import launch
from taskcell.cluster.mapping import WorkerCapacity
from taskcell.cluster.pools import Pool, choose, configured_pools, parse_pools
from taskcell.errors import InfeasibleError, SpecError
from taskcell.spec import Resources

GIB = 2**30
GPU_SHAPE = {"cpu": 8, "memory": "32Gi", "gpu": "A100:2"}


def pool(name="a100x2", backend="local", options=None, **shape) -> Pool:
    (only,) = parse_pools(
        {name: {"shape": shape or GPU_SHAPE, "backend": backend, "options": options or {}}}
    )
    return only


def test_a_pool_advertises_its_shape_as_dask_resources():
    p = pool()
    assert p.resources == {"CPU": 8, "MEMORY": 32 * GIB, "GPU": 2, "GPU-A100": 2}
    assert (p.nthreads, p.memory_limit, p.max_workers, p.backend) == (8, 32 * GIB, 1, "local")


def test_a_latch_preset_is_a_shape():
    (p,) = parse_pools({"v100": {"shape": "v100_x4_task", "max_workers": 3}})
    assert p.shape == Resources(cpu=64, memory="256Gi", gpu="V100:4")
    assert p.resources["GPU-V100"] == 4
    assert p.max_workers == 3  # Dask's spelling with _ reads as with -


def test_timeouts_default_to_the_provisioning_settings_and_read_durations():
    (p,) = parse_pools({"a": {"shape": "small_task"}})
    assert (p.idle_timeout, p.start_timeout) == (300, 600)
    (p,) = parse_pools({"a": {"shape": "small_task", "idle-timeout": "90s", "start-timeout": "2h"}})
    assert (p.idle_timeout, p.start_timeout) == (90, 7200)


def test_pools_come_from_dask_config_in_the_order_written():
    with dask.config.set(
        {"taskcell.pools": {"b": {"shape": "small_task"}, "a": {"shape": GPU_SHAPE}}}
    ):
        assert [p.name for p in configured_pools()] == ["b", "a"]
    assert configured_pools() == []


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([1, 2], "taskcell.pools must be a mapping of pool name"),
        (
            {"a b": {"shape": "small_task"}},
            "a pool name must be letters, digits and '_.-', got 'a b'",
        ),
        ({"a": "small_task"}, "taskcell.pools.a must be a mapping with a shape"),
        ({"a": {}}, "taskcell.pools.a needs a shape"),
        (
            {"a": {"shape": "small_tsk"}},
            "taskcell.pools.a.shape: preset= 'small_tsk' is not a known",
        ),
        ({"a": {"shape": 8}}, "expected a preset name or a mapping of resource fields, got 8"),
        ({"a": {"shape": {"gpu": "A100:1"}}}, "taskcell.pools.a.shape must give cpu as one amount"),
        ({"a": {"shape": {"cpu": 2}}}, "must give memory as one amount"),
        ({"a": {"shape": {"cpu": [1, 2], "memory": "1Gi"}}}, "must give cpu as one amount"),
        ({"a": {"shape": {"cpu": 2, "memory": "lots"}}}, "taskcell.pools.a.shape: memory="),
        ({"a": {"shape": "small_task", "backend": "k8s"}}, "backend must be one of local, slurm"),
        ({"a": {"shape": "small_task", "max-workers": 0}}, "max-workers must be a whole number"),
        ({"a": {"shape": "small_task", "max-workers": True}}, "got True"),
        ({"a": {"shape": "small_task", "max-workers": "2"}}, "got '2'"),
        ({"a": {"shape": "small_task", "idle-timeout": "soon"}}, "idle-timeout must be a duration"),
        ({"a": {"shape": "small_task", "start-timeout": -1}}, "start-timeout must be a duration"),
        ({"a": {"shape": "small_task", "options": [1]}}, "options must be a mapping"),
        ({"a": {"shape": "small_task", "size": 2}}, "unknown key(s) 'size' (known: shape,"),
    ],
    ids=[
        "not-a-mapping",
        "bad-name",
        "entry-not-a-mapping",
        "no-shape",
        "unknown-preset",
        "shape-a-number",
        "no-cpu",
        "no-memory",
        "cpu-range",
        "bad-memory",
        "unknown-backend",
        "zero-workers",
        "bool-workers",
        "text-workers",
        "bad-duration",
        "negative-duration",
        "options-a-list",
        "unknown-key",
    ],
)
def test_bad_pools_are_refused_naming_the_pool_and_the_accepted_forms(entries, message):
    with pytest.raises(SpecError) as caught:
        parse_pools(entries)
    assert message in str(caught.value)


#: The one live worker, small and without GPUs.
SMALL = WorkerCapacity(address="tcp://small", name="tcp://small", nthreads=2, memory_limit=4 * GIB)


def test_a_request_goes_to_the_first_pool_that_meets_it():
    pools = [
        pool("cpu", cpu=16, memory="64Gi"),
        pool("a100x2"),
        pool("h100", gpu="H100:8", cpu=8, memory="8Gi"),
    ]
    assert choose(Resources(gpu=1), [SMALL], pools, InfeasibleError("")).name == "a100x2"
    assert choose(Resources(cpu=12), [SMALL], pools, InfeasibleError("")).name == "cpu"
    assert choose(Resources(gpu="H100:2"), [], pools, InfeasibleError("")).name == "h100"


def test_memory_beyond_a_pools_shape_is_a_shortfall_even_where_no_live_worker_reserves_it():
    with pytest.raises(
        InfeasibleError, match=r"pool a100x2 \(local\): asks MEMORY=64 GiB, its workers have 32 GiB"
    ):
        choose(Resources(gpu=1, memory="64Gi"), [SMALL], [pool()], InfeasibleError("none live."))


def test_no_pool_fits_keeps_why_no_live_worker_can_and_names_each_pool():
    pools = [pool("cpu", cpu=16, memory="64Gi"), pool("a100x2")]
    with pytest.raises(InfeasibleError) as caught:
        choose(Resources(gpu="H100:1"), [SMALL], pools, InfeasibleError("no live worker can."))
    assert str(caught.value) == (
        "no live worker can. No pool can start a worker that can either: "
        "pool cpu (local): asks GPU=1, its workers have 0, asks GPU-H100=1, its workers have 0; "
        "pool a100x2 (local): asks GPU-H100=1, its workers have 0."
    )


def test_without_pools_the_original_error_stands():
    original = InfeasibleError("no live worker can.")
    with pytest.raises(InfeasibleError) as caught:
        choose(Resources(gpu=1), [SMALL], [], original)
    assert caught.value is original


@pytest.mark.parametrize(
    ("resources", "slots"),
    [({"GPU": 1, "GPU-A100": 1}, 2), ({"GPU": 2}, 1), ({"CPU": 3}, 2), ({}, 8), ({"GPU": 0.5}, 4)],
    ids=["one-gpu", "both-gpus", "cpus", "nothing-asked", "half-gpu"],
)
def test_slots_are_how_many_such_tasks_one_worker_runs_at_once(resources, slots):
    assert pool().slots(resources) == slots


def test_a_local_worker_advertises_the_shape_in_a_session_of_its_own():
    worker = launch.make_worker(
        pool(options={"env": {"A": 1}, "args": ["--no-nanny"]}), "tcp://127.0.0.1:1", "a100x2-1"
    )
    assert isinstance(worker, launch.LocalWorker)
    assert worker.argv[:4] == [
        sys.executable,
        "-m",
        "distributed.cli.dask_worker",
        "tcp://127.0.0.1:1",
    ]
    flags = dict(zip(worker.argv[4::2], worker.argv[5::2], strict=False))
    assert flags["--name"] == "a100x2-1"
    assert flags["--nthreads"] == "8"
    assert flags["--memory-limit"] == str(32 * GIB)
    assert flags["--resources"] == f"CPU=8,MEMORY={32 * GIB},GPU=2,GPU-A100=2"
    assert worker.argv[-1] == "--no-nanny"
    assert worker.env == {"A": "1"}


def test_a_local_worker_and_its_nanny_listen_on_the_interface_that_reaches_the_scheduler():
    worker = launch.make_worker(pool(), "tcp://127.0.0.1:8786", "a100x2-1")
    assert isinstance(worker, launch.LocalWorker)
    assert worker.argv[worker.argv.index("--host") + 1] == "127.0.0.1"
    assert worker.argv[worker.argv.index("--dashboard-address") + 1] == "127.0.0.1:0"


@pytest.mark.parametrize(
    "theirs",
    [["--host", "10.1.2.3"], ["--listen-address=tcp://10.1.2.3:9000"], ["--interface", "lo"]],
    ids=["host", "listen-address", "interface"],
)
def test_a_local_pools_own_address_args_are_kept_unchanged(theirs):
    worker = launch.make_worker(pool(options={"args": theirs}), "tcp://127.0.0.1:8786", "w")
    assert worker.argv[-len(theirs) :] == theirs
    assert "--host" not in worker.argv[: -len(theirs)]


def test_a_local_pool_refuses_options_it_does_not_have():
    with pytest.raises(
        SpecError, match=r"unknown option\(s\) queue for a local pool \(known: env, args, python\)"
    ):
        launch.make_worker(pool(options={"queue": "gpu"}), "tcp://s:1", "w")


def test_a_slurm_job_asks_for_the_shape_and_its_gpus():
    job = launch.make_worker(
        pool(backend="slurm", options={"queue": "gpu", "walltime": "01:00:00"}),
        "tcp://s:1",
        "a100x2-1",
    )
    script = job.job_script()
    assert "#SBATCH --cpus-per-task=8" in script
    assert "#SBATCH --mem=32G" in script
    assert "#SBATCH -p gpu" in script
    assert "#SBATCH --gres=gpu:a100:2" in script
    assert f"--resources CPU=8,MEMORY={32 * GIB},GPU=2,GPU-A100=2" in script
    assert "--name a100x2-1" in script


def test_an_untyped_gpu_asks_slurm_for_any_gpus():
    p = pool(backend="slurm", cpu=4, memory="8Gi", gpu=2)
    assert "#SBATCH --gres=gpu:2\n" in launch.make_worker(p, "tcp://s:1", "w").job_script()


def test_a_gres_directive_of_the_users_own_is_kept():
    options = {"job_extra_directives": ["--gres=gpu:tesla:2"]}
    script = launch.make_worker(
        pool(backend="slurm", options=options), "tcp://s:1", "w"
    ).job_script()
    assert "--gres=gpu:tesla:2" in script
    assert "--gres=gpu:a100" not in script


def test_pbs_uses_its_own_job_class_with_the_same_shape():
    script = launch.make_worker(pool(backend="pbs"), "tcp://s:1", "w").job_script()
    assert "#PBS" in script
    assert "--resources CPU=8," in script
    assert "--gres" not in script


def test_a_bad_jobqueue_option_names_the_pool():
    with pytest.raises(SpecError, match=r"taskcell.pools.a100x2.options: .*no_such_option"):
        launch.make_worker(pool(backend="slurm", options={"no_such_option": 1}), "tcp://s:1", "w")


@pytest.mark.parametrize(
    ("cls", "error", "message"),
    [
        ("", SpecError, "options.cls must be a dotted path to a worker class"),
        ("no_such_module.Worker", ImportError, "pool a100x2 (spec) needs no_such_module"),
        ("distributed.NoSuchWorker", SpecError, "distributed has no 'NoSuchWorker'"),
    ],
    ids=["no-class", "no-module", "no-attribute"],
)
def test_a_spec_pool_names_a_class_that_exists(cls, error, message):
    with pytest.raises(error) as caught:
        launch.make_worker(pool(backend="spec", options={"cls": cls}), "tcp://s:1", "w")
    assert message in str(caught.value)


GATEWAY = "gateway://127.0.0.1:8000/dev.1f2e3d"
#: Dask's gateway.* config, none of it set: only the pool's options count.
NO_GATEWAY_CONFIG = {
    "gateway.address": None,
    "gateway.proxy-address": None,
    "gateway.auth.type": None,
}


def gateway_pool(**options) -> Pool:
    return pool(backend="gateway", options=options)


def test_a_gateway_pool_scales_the_kernels_own_cluster_through_the_gateway_it_names():
    p = gateway_pool(address="https://hub.example.org/gw", auth="jupyterhub")
    with dask.config.set(NO_GATEWAY_CONFIG):
        worker = launch.make_worker(p, GATEWAY, "a100x2-1")
    assert isinstance(worker, launch.GatewayWorker)
    assert worker.options == {
        "address": "https://hub.example.org/gw",
        "auth": "jupyterhub",
        "cluster": "dev.1f2e3d",
    }
    assert (worker.name, worker.joined) == ("a100x2-1", False)  # the Gateway names it later
    assert launch.describe(p, worker) == "Gateway cluster dev.1f2e3d"


def test_a_gateway_pool_takes_the_gateway_from_dask_config_as_the_hub_sets_it():
    config = {
        "gateway.address": "http://gw:8000",
        "gateway.proxy-address": 8786,
        "gateway.auth.type": "basic",
    }
    with dask.config.set(config):
        options = launch.gateway_options(gateway_pool(proxy_address="tls://gw:443"), GATEWAY)
    assert options == {
        "address": "http://gw:8000",
        "proxy-address": "tls://gw:443",  # the pool's own wins, either spelling of its key
        "auth": "basic",
        "cluster": "dev.1f2e3d",
    }


def test_a_gateway_pool_names_its_cluster_where_the_scheduler_is_reached_directly():
    with dask.config.set(NO_GATEWAY_CONFIG):
        options = launch.gateway_options(
            gateway_pool(address="http://gw", cluster="dev.1f2e3d"), "tls://10.0.0.5:8786"
        )
    assert options["cluster"] == "dev.1f2e3d"


@pytest.mark.parametrize(
    ("options", "scheduler", "message"),
    [
        (
            {"address": "http://gw", "image": "x"},
            GATEWAY,
            "taskcell.pools.a100x2.options: unknown option(s) image for a gateway pool "
            "(known: address, proxy-address, auth, cluster)",
        ),
        (
            {},
            GATEWAY,
            "taskcell.pools.a100x2.options.address: no Gateway address; give the Gateway's "
            "http(s):// address (as Gateway(address=...) takes it), or set Dask's gateway.address",
        ),
        (
            {"address": "gw:8000"},
            GATEWAY,
            "taskcell.pools.a100x2.options.address must be the Gateway's http:// or https:// "
            "address, such as https://hub.example.org/services/dask-gateway, got 'gw:8000'",
        ),
        (
            {"address": "http://gw", "proxy-address": True},
            GATEWAY,
            "options.proxy-address must be the Gateway proxy's address (gateway://HOST:PORT, "
            "tls://HOST:PORT or HOST:PORT) or its port number, got True",
        ),
        (
            {"address": "http://gw", "proxy-address": 70000},
            GATEWAY,
            "or its port number, got 70000",
        ),
        (
            {"address": "http://gw", "auth": "token"},
            GATEWAY,
            "options.auth must be one of basic, kerberos, jupyterhub or the dotted path of a "
            "dask_gateway.auth.GatewayAuth class, got 'token'",
        ),
        (
            {"address": "http://gw", "cluster": "a/b"},
            "tls://10.0.0.5:8786",
            "options.cluster must be a Gateway cluster's name, such as dev.1f2e3d4c5b6a, got 'a/b'",
        ),
        (
            {"address": "http://gw", "cluster": "other"},
            GATEWAY,
            "options.cluster names Gateway cluster other, and the kernel's scheduler is cluster "
            "dev.1f2e3d's (gateway://127.0.0.1:8000/dev.1f2e3d): a pool's workers must join the "
            "kernel's scheduler",
        ),
        (
            {"address": "http://gw"},
            "tcp://127.0.0.1:8786",
            "taskcell.pools.a100x2: a gateway pool scales the Dask Gateway cluster the kernel is "
            "connected to, and the kernel's scheduler tcp://127.0.0.1:8786 is not one "
            "(gateway://PROXY/NAME)",
        ),
    ],
    ids=[
        "unknown-option",
        "no-address",
        "address-not-http",
        "proxy-a-bool",
        "proxy-port-too-big",
        "unknown-auth",
        "cluster-with-a-slash",
        "another-cluster",
        "not-a-gateway-scheduler",
    ],
)
def test_bad_gateway_options_are_refused_naming_the_value_and_the_accepted_forms(
    options, scheduler, message
):
    with dask.config.set(NO_GATEWAY_CONFIG), pytest.raises(SpecError) as caught:
        launch.make_worker(gateway_pool(**options), scheduler, "w")
    assert message in str(caught.value)


def test_a_gateway_clusters_environment_advertises_the_shape_keeping_its_case():
    environment = launch.gateway_environment(pool())
    assert environment == {
        "DASK_DISTRIBUTED__WORKER__RESOURCES": (
            f"{{'CPU': 8, 'MEMORY': {32 * GIB}, 'GPU': 2, 'GPU-A100': 2}}"
        )
    }
    # As a worker's Dask config reads it from its environment.
    read = dask.config.collect_env(environment)
    assert read["distributed"]["worker"]["resources"] == pool().resources
