"""``%%task`` in a real kernel against real scheduler and worker processes."""

from __future__ import annotations

import textwrap

import pytest
from waiting import PATIENCE

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gpu_kernel(kernel, module_dask):
    """A kernel pointed at one worker process advertising ``GPU=2,process=1``, two threads."""
    module_dask.worker("--nthreads", "2", "--resources", "GPU=2,process=1", name="gpu-worker")
    out = kernel.run(
        f"import distributed; distributed.Client({module_dask.address!r}).wait_for_workers(1)\n"
        f"%task_cluster {module_dask.address}"
    )
    assert out.status == "ok", out.error_text
    return kernel


def cell(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


def test_inputs_in_outputs_back(gpu_kernel):
    gpu_kernel.run("x = 20; unused = object()")
    out = gpu_kernel.run(
        cell("""
        %%task
        y = x + 1
        z = y * 2
    """)
    )
    assert out.status == "ok", out.error_text
    assert gpu_kernel.value("(y, z)") == (21, 42)


def test_augmented_assignment_and_del(gpu_kernel):
    gpu_kernel.run("counter = 1; doomed = 5")
    out = gpu_kernel.run(
        cell("""
        %%task
        counter += 1
        del doomed
    """)
    )
    assert out.status == "ok", out.error_text
    assert gpu_kernel.value("(counter, 'doomed' in globals())") == (2, False)


def test_notebook_functions_classes_and_imports_travel(gpu_kernel):
    gpu_kernel.run(
        cell("""
        scale = 3
        def helper(v):
            return v * scale
        class Box:
            def __init__(self, v):
                self.v = v
    """)
    )
    out = gpu_kernel.run(
        cell("""
        %%task
        import math
        box = Box(helper(2))
        root = math.sqrt(box.v + 10)
    """)
    )
    assert out.status == "ok", out.error_text
    assert gpu_kernel.value("(box.v, root, math.pi > 3)") == (6, 4.0, True)


def test_failure_leaves_namespace_unchanged_and_shows_user_traceback(gpu_kernel):
    gpu_kernel.run("a = 100")
    out = gpu_kernel.run(
        cell("""
        %%task
        a = 1
        b = 2
        1 / 0
    """)
    )
    assert out.status == "error"
    assert "ZeroDivisionError" in out.error_text
    assert "line 4" in out.error_text and "1 / 0" in out.error_text
    assert "distributed" not in out.error_text
    assert gpu_kernel.value("(a, 'b' in globals())") == (100, False)


def test_last_expression_is_out_and_semicolon_hides_it(gpu_kernel):
    gpu_kernel.run("base = 4")
    shown = gpu_kernel.run("%%task\nbase * 10")
    assert shown.result == "40"
    hidden = gpu_kernel.run("%%task\nbase * 10;")
    assert hidden.status == "ok" and hidden.result is None


def test_output_streams_while_the_cell_runs(gpu_kernel, tmp_path):
    go = tmp_path / "go"
    msg_id = gpu_kernel.start(
        cell(f"""
        %%task
        import os, time
        print("tick", flush=True)
        while not os.path.exists({str(go)!r}):  # the test answers once it has seen the tick
            time.sleep(0.05)
        print("tock")
    """)
    )
    seen = gpu_kernel.wait_for_print(msg_id, "tick")
    go.touch()
    out = gpu_kernel.wait(msg_id)
    assert out.status == "ok", out.error_text
    assert seen + out.stdout == "tick\ntock\n"


def test_display_output_appears(gpu_kernel):
    out = gpu_kernel.run(
        cell("""
        %%task
        import pandas as pd
        display(pd.DataFrame({"a": [1, 2]}))
    """)
    )
    assert out.status == "ok", out.error_text
    assert any("text/html" in d and "<table" in d["text/html"] for d in out.displays)


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("--gpu A100:x", ["gpu", "A100:x"]),
        ("--memory lots", ["memory", "lots", "4Gi"]),
        ("no_such_preset", ["is not a known preset", "no_such_preset"]),
        ("--frobnicate 3", ["unrecognized arguments", "--frobnicate"]),
    ],
    ids=["bad-gpu", "bad-memory", "unknown-preset", "unknown-option"],
)
def test_bad_options_are_usage_errors_and_nothing_runs(gpu_kernel, line, words):
    gpu_kernel.run("ran = False")
    out = gpu_kernel.run(f"%%task {line}\nran = True")
    assert out.status == "error"
    assert "UsageError" in out.stderr
    for word in words:
        assert word in out.stderr
    assert gpu_kernel.value("ran") is False


def test_infeasible_request_fails_at_once_with_the_shortfall(gpu_kernel):
    out = gpu_kernel.run("%%task --gpu 4\nx = 1", timeout=30)  # never waits in no-worker
    assert out.status == "error"
    assert "asks GPU=4" in out.error_text and "the most any worker has is 2" in out.error_text


def test_gpu_tasks_see_only_their_own_devices(gpu_kernel, tmp_path):
    def meeting(name: str) -> str:
        """A cell that holds its GPU until both cells have started: they hold one each."""
        return cell(f"""
            import os, pathlib, time
            pathlib.Path({str(tmp_path)!r}, {name!r}).touch()
            while len(os.listdir({str(tmp_path)!r})) < 2:
                time.sleep(0.05)
            {name} = os.environ['CUDA_VISIBLE_DEVICES']
        """)

    out = gpu_kernel.run(
        f"h1 = get_ipython().run_cell_magic('task', '--gpu 1 --bg', {meeting('seen1')!r})\n"
        f"h2 = get_ipython().run_cell_magic('task', '--gpu 1 --bg', {meeting('seen2')!r})\n"
        "h1.wait(60); h2.wait(60)"
    )
    assert out.status == "ok", out.error_text
    assert sorted(gpu_kernel.value("[seen1, seen2]")) == ["0", "1"]
    assert gpu_kernel.value("__import__('os').environ.get('CUDA_VISIBLE_DEVICES')") is None


def test_interrupt_stops_the_task_and_frees_its_resources(gpu_kernel):
    gpu_kernel.run("slept = 'no'")
    msg_id = gpu_kernel.start(
        "%%task --gpu 2\nimport time\nprint('started', flush=True)\ntime.sleep(600)\nslept = 'yes'"
    )
    gpu_kernel.wait_for_print(msg_id, "started")
    gpu_kernel.manager.interrupt_kernel()
    out = gpu_kernel.wait(msg_id, timeout=PATIENCE)
    assert out.status == "error" and "KeyboardInterrupt" in out.error_text
    # The GPUs are free again: a cell asking for both runs (it would wait behind the sleep).
    again = gpu_kernel.run("%%task --gpu 2\nok = 1", timeout=PATIENCE)
    assert again.status == "ok", again.error_text
    assert gpu_kernel.value("slept") == "no"


def test_large_result_stays_remote_and_next_cell_uses_it(gpu_kernel):
    gpu_kernel.run("import dask; dask.config.set({'taskcell.result-threshold': '1MiB'})")
    try:
        out = gpu_kernel.run("%%task\nbig = bytes(8 * 2**20)")
        assert out.status == "ok", out.error_text
        assert gpu_kernel.value("type(big).__name__") == "RemoteValue"
        used = gpu_kernel.run("%%task\nsize = len(big)")
        assert used.status == "ok", used.error_text
        assert gpu_kernel.value("size") == 8 * 2**20
        assert gpu_kernel.value("len(big)") == 8 * 2**20
    finally:
        gpu_kernel.run("dask.config.set({'taskcell.result-threshold': '64MiB'})")


def test_a_cell_changing_a_remote_value_changes_it_where_it_is(gpu_kernel):
    gpu_kernel.run("import dask; dask.config.set({'taskcell.result-threshold': '1MiB'})")
    try:
        made = gpu_kernel.run("%%task\nimport numpy as np\nzeros = np.zeros(2**20)\nsame = zeros")
        assert made.status == "ok", made.error_text
        assert gpu_kernel.value("type(zeros).__name__") == "RemoteValue"
        assert gpu_kernel.value("same is zeros") is True
        out = gpu_kernel.run("%%task\nzeros[:] = 7\nchanged = float(zeros.sum())")
        assert out.status == "ok", out.error_text
        assert gpu_kernel.value("changed") == 7 * 2**20
        # As in Python: the notebook's value changed, for every name holding it, and it
        # stayed on the cluster.
        assert gpu_kernel.value("(type(same).__name__, same is zeros)") == ("RemoteValue", True)
        again = gpu_kernel.run("%%task\nseen = float(same.sum())")
        assert again.status == "ok", again.error_text
        assert gpu_kernel.value("seen") == 7 * 2**20
        assert gpu_kernel.value("float(zeros.sum())") == 7 * 2**20
    finally:
        gpu_kernel.run("dask.config.set({'taskcell.result-threshold': '64MiB'})")


def test_tasks_lists_this_kernels_tasks(gpu_kernel):
    out = gpu_kernel.run("%%task --name tagged\nq = 1")
    assert out.status == "ok", out.error_text
    frame = gpu_kernel.run("_t = %tasks\nprint(_t[_t.cell == 'tagged'].iloc[-1].to_dict())")
    assert "'state': 'finished'" in frame.stdout
    assert "tcp://127.0.0.1" in frame.stdout


def last_request(kernel) -> str:
    return kernel.value("(lambda t: t.iloc[-1].request)(get_ipython().run_line_magic('tasks', ''))")


def test_preset_with_fields_overridden(gpu_kernel):
    out = gpu_kernel.run("%%task small_gpu_task --cpu 1 --memory 1Gi\nv = 1")
    assert out.status == "ok", out.error_text
    assert last_request(gpu_kernel) == "Resources(cpu=1, memory='1Gi', gpu=1)"


def test_user_preset_from_dask_config(gpu_kernel):
    gpu_kernel.run("import dask; dask.config.set({'taskcell.presets': {'tiny': {'cpu': 1}}})")
    out = gpu_kernel.run("%%task tiny\nv = 2")
    assert out.status == "ok", out.error_text
    assert last_request(gpu_kernel) == "Resources(cpu=1)"


def test_dynamic_value_is_evaluated_against_the_namespace(gpu_kernel):
    gpu_kernel.run("files = ['a', 'b', 'c']")
    out = gpu_kernel.run('%%task --cpu "min(2, len(files))"\nn = len(files)')
    assert out.status == "ok", out.error_text
    assert last_request(gpu_kernel) == "Resources(cpu=2)"


def test_a_comprehension_in_a_dynamic_value_sees_the_notebooks_names(gpu_kernel):
    # eval() with the namespace as locals hid it from the comprehension: NameError on `n`.
    gpu_kernel.run("files = ['a', 'bb', 'ccc']\nn = 1")
    out = gpu_kernel.run('%%task --cpu "sum(1 for f in files if len(f) > n)"\nk = len(files)')
    assert out.status == "ok", out.error_text
    assert last_request(gpu_kernel) == "Resources(cpu=2)"


def test_named_environment_then_cell_fields(gpu_kernel):
    out = gpu_kernel.run("%task_env training --gpu 1 --memory 1Gi")
    assert out.status == "ok", out.error_text
    out = gpu_kernel.run("%%task --env training --memory 2Gi\nw = 1")
    assert out.status == "ok", out.error_text
    assert last_request(gpu_kernel) == "Resources(memory='2Gi', gpu=1)"
    unknown = gpu_kernel.run("%%task --env nope\nw = 2")
    assert "UsageError" in unknown.stderr
    assert "'nope' is not a defined environment" in unknown.stderr


def test_any_abstract_resource(gpu_kernel):
    out = gpu_kernel.run("%%task --resources process=1\nw = 3")
    assert out.status == "ok", out.error_text
    assert last_request(gpu_kernel) == "Resources(extra={'process': 1})"
    too_many = gpu_kernel.run("%%task --resources process=2\nw = 4")
    assert "asks process=2; the most any worker has is 1" in too_many.error_text
    assert gpu_kernel.value("w") == 3


def test_preset_auto_uses_the_planner_then_this_cells_history(gpu_kernel):
    first = gpu_kernel.run("%%task auto --name sized\nsized = list(range(1000))")
    assert first.status == "ok", first.error_text
    assert "--preset auto chose" in first.stdout
    again = gpu_kernel.run("%%task auto --name sized\nsized = list(range(1000))")
    assert again.status == "ok", again.error_text
    assert "--preset auto chose" in again.stdout and "1 past run of this cell" in again.stdout


def test_tasks_shows_hints_and_panel_opens(gpu_kernel):
    out = gpu_kernel.run("_t = %tasks\nprint(list(_t.columns))")
    assert "'hint'" in out.stdout and "'cores_used'" in out.stdout
    for _ in range(2):  # a second panel too: opening one must not break the next
        panel = gpu_kernel.run("p = %task_panel\nprint(type(p).__name__)\np.close()")
        assert panel.status == "ok", panel.error_text
        assert panel.stdout.strip() == "Panel"


def test_notebook_functions_read_the_cells_own_globals(gpu_kernel):
    gpu_kernel.run(
        cell("""
        factor = 2
        def times(x):
            return x * factor
        class Scaler:
            def apply(self, x):
                return x * factor
    """)
    )
    out = gpu_kernel.run("%%task\nfactor = 3\nscaled = (times(2), Scaler().apply(2))")
    assert out.status == "ok", out.error_text
    assert gpu_kernel.value("scaled") == (6, 6)  # as in a normal cell, not the old factor


def test_gpus_reserved_through_resources_are_visible(gpu_kernel):
    out = gpu_kernel.run(
        "%%task --resources GPU=1\nimport os\nvia_extra = os.environ['CUDA_VISIBLE_DEVICES']"
    )
    assert out.status == "ok", out.error_text
    assert gpu_kernel.value("via_extra") in ("0", "1")


def test_a_queued_cell_says_what_it_waits_for_then_where_it_runs(gpu_kernel, tmp_path):
    release = tmp_path / "release"
    hold = gpu_kernel.run(
        cell(f"""
        %%task --gpu 2 --bg
        import os, time
        while not os.path.exists({str(release)!r}):  # both GPUs held until the test has seen
            time.sleep(0.05)
        held_both = True
    """)
    )
    assert hold.status == "ok", hold.error_text
    msg_id = gpu_kernel.start("%%task --gpu 2\nafter = True")

    def says_it_waits(statuses: list[str]) -> bool:
        return any(
            "waiting" in s and "GPU=2" in s and "1 capable worker, all busy" in s for s in statuses
        )

    gpu_kernel.read_until(lambda: gpu_kernel.shown(msg_id), "it to say it waits", says_it_waits)
    release.touch()
    out = gpu_kernel.wait(msg_id)
    assert out.status == "ok", out.error_text
    statuses = gpu_kernel.shown(msg_id)
    assert says_it_waits(statuses)
    assert "ran on tcp://127.0.0.1" in statuses[-1]


def test_dask_api_inside_a_cell_reaches_the_cluster(gpu_kernel):
    out = gpu_kernel.run(
        cell("""
        %%task
        from distributed import Event, get_client
        flag = Event("taskcell-test-flag")
        flag.set()
        workers = len(get_client().scheduler_info()["workers"])
        seen = flag.is_set()
        del flag
    """)
    )
    assert out.status == "ok", out.error_text
    assert gpu_kernel.value("(workers, seen)") == (1, True)


def test_an_output_that_cannot_travel_back_is_named_and_the_others_come_back(gpu_kernel):
    gpu_kernel.run("kept = 'before'\nguard = 'old'")
    out = gpu_kernel.run("%%task\nimport threading\nkept = 'after'\nguard = threading.Lock()")
    assert out.status == "ok", out.error_text
    assert "guard (lock: cannot pickle '_thread.lock' object) cannot come back" in out.stderr
    assert gpu_kernel.value("kept") == "after"
    assert gpu_kernel.value("'guard' in dir()") is False
