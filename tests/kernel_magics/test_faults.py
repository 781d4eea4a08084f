"""``%%task`` keeps the user's work when things go wrong: interrupts, dead workers, lost or
frozen schedulers, cells that will not stop, inputs that cannot travel.

Real kernels (interrupted as JupyterLab does, through the kernel manager), real scheduler and
worker processes. Nothing here waits a fixed time: each step waits for what it needs to see.
"""

from __future__ import annotations

import os
import signal
import textwrap
import time

import pytest
from conftest import KernelSession, held_result
from waiting import eventually

pytestmark = pytest.mark.slow


def cell(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


def connected_kernel(address: str, *setup: str) -> KernelSession:
    kernel = KernelSession()
    out = kernel.run(
        "%load_ext taskcell\nimport dask, distributed\n"
        f"distributed.Client({address!r}).wait_for_workers(1)\n"
        f"%task_cluster {address}\n" + "\n".join(setup)
    )
    assert out.status == "ok", out.error_text
    return kernel


@pytest.fixture
def embedded_kernel():
    """A kernel with no cluster configured: the first %%task starts the embedded cluster."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
    kernel = KernelSession(env=env | {"DASK_TASKCELL__EMBEDDED_CLUSTER__N_WORKERS": "1"})
    try:
        assert kernel.run("%load_ext taskcell").status == "ok"
        yield kernel
    finally:
        kernel.stop()


def test_interrupt_on_the_embedded_cluster_stops_only_the_cell(embedded_kernel):
    kernel = embedded_kernel
    kernel.run("slept = 'no'")
    msg_id = kernel.start(
        "%%task\nimport time\nprint('started', flush=True)\ntime.sleep(60)\nslept = 'yes'"
    )
    kernel.wait_for_print(msg_id, "started")
    kernel.manager.interrupt_kernel()
    out = kernel.wait(msg_id)
    errors = out.of_type("error")
    assert errors[0]["content"]["ename"] == "KeyboardInterrupt"
    assert len(errors[0]["content"]["traceback"]) == 1, errors[0]["content"]["traceback"]
    assert "taskcell" not in out.stderr
    assert kernel.value("slept") == "no"
    assert "(1 workers)" in kernel.value("get_ipython().run_line_magic('task_cluster', '')")
    again = kernel.run("%%task\nafter = 'ran'")
    assert again.status == "ok", again.error_text
    assert kernel.value("after") == "ran"


def embedded_clusters(kernel: KernelSession) -> list:
    """The kernel's embedded cluster processes (psutil.Process), however many there are; not
    a process one of them is starting, which bears its command line until it runs its own."""
    import psutil

    kernel_process = psutil.Process(kernel.manager.provisioner.process.pid)
    found = [
        p
        for p in kernel_process.children(recursive=True)
        if "taskcell.cluster.embedded" in " ".join(p.cmdline())
    ]
    pids = {p.pid for p in found}
    return [p for p in found if p.ppid() not in pids]


@pytest.fixture
def held_start(tmp_path):
    """A Dask scheduler preload that holds the embedded cluster's start until the test opens
    the gate: ``(environment, gate)``."""
    gate = tmp_path / "gate"
    hold = tmp_path / "hold.py"
    hold.write_text(
        cell(f"""
        import pathlib, time
        def dask_setup(scheduler):
            while not pathlib.Path({str(gate)!r}).exists():
                time.sleep(0.05)
    """)
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
    env |= {
        "DASK_TASKCELL__EMBEDDED_CLUSTER__N_WORKERS": "1",
        "DASK_DISTRIBUTED__SCHEDULER__PRELOAD": str(hold),
    }
    try:
        yield env, gate
    finally:
        gate.touch()


@pytest.mark.parametrize("early", [True, False], ids=["started-on-load", "started-by-the-cell"])
def test_an_interrupt_while_the_embedded_cluster_starts_ends_the_cell_in_one_line(
    held_start, early
):
    env, gate = held_start
    env |= {"DASK_TASKCELL__EMBEDDED_CLUSTER__START_EARLY": str(early)}
    kernel = KernelSession(env=env)
    try:
        assert kernel.run("%load_ext taskcell\nx = 'before'").status == "ok"
        msg_id = kernel.start("%%task\nx = 'after'")
        # Shown from within the wait, which the held start cannot end.
        kernel.read_until(
            lambda: kernel.shown(msg_id),
            "the cell to show it waits for the start",
            lambda shown: any("waiting for the embedded cluster to start" in s for s in shown),
        )
        kernel.manager.interrupt_kernel()
        out = kernel.wait(msg_id)
        error = out.of_type("error")[0]["content"]
        assert error["ename"] == "KeyboardInterrupt"
        assert error["traceback"] == [
            "KeyboardInterrupt: the embedded cluster was still starting; it goes on starting, "
            "and the next cell uses it"
        ]
        assert kernel.value("x") == "before"
        [cluster] = eventually(lambda: embedded_clusters(kernel), "the start to go on")

        gate.touch()
        out = kernel.run("%%task\nx = 'after'")
        assert out.status == "ok", out.error_text
        assert kernel.value("x") == "after"
        assert embedded_clusters(kernel) == [cluster]
        assert "(1 workers)" in kernel.value("get_ipython().run_line_magic('task_cluster', '')")
    finally:
        kernel.stop()
    eventually(lambda: not cluster.is_running(), "the embedded cluster to end with its kernel")


#: Holds the import ``%load_ext`` begins in the background (so the next cell waits for it,
#: before it runs) until GATE exists, and prints from a thread once the cell waits there.
HELD_IMPORT = """
import pathlib, sys, threading, time
GATE = pathlib.Path({gate!r})

class HoldImport:
    def find_spec(self, name, path=None, target=None):
        if name == "taskcell.cluster.provision":
            while not GATE.exists():
                time.sleep(0.05)

def waits_before_the_cell():
    frame = sys._current_frames().get(threading.main_thread().ident)
    while frame is not None and frame.f_globals.get("__name__") != "taskcell.cluster.interruptible":
        frame = frame.f_back
    return frame is not None and frame.f_back.f_code.co_name == "before_cell"

def say_when_waiting():
    while not waits_before_the_cell():
        time.sleep(0.01)
    print("waiting before the cell", flush=True)

sys.meta_path.insert(0, HoldImport())
threading.Thread(target=say_when_waiting, daemon=True).start()
"""


def test_an_interrupt_while_a_task_cell_waits_for_the_extensions_imports_stops_it(tmp_path):
    gate = tmp_path / "gate"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
    env |= {
        "DASK_TASKCELL__EMBEDDED_CLUSTER__N_WORKERS": "1",
        "DASK_TASKCELL__EMBEDDED_CLUSTER__START_EARLY": "False",
    }
    kernel = KernelSession(env=env)
    try:
        assert kernel.run(HELD_IMPORT.format(gate=str(gate))).status == "ok"
        assert kernel.run("%load_ext taskcell").status == "ok"
        msg_id = kernel.start("%%task\nx = 'ran'")
        kernel.wait_for_print(msg_id, "waiting before the cell")
        kernel.manager.interrupt_kernel()
        out = kernel.wait(msg_id)
        error = out.of_type("error")[0]["content"]
        assert error["ename"] == "KeyboardInterrupt"
        assert error["traceback"] == [
            "KeyboardInterrupt: the cell was interrupted before it started"
        ]

        gate.touch()
        assert kernel.value("globals().get('x', 'unset')") == "unset"
        out = kernel.run("%%task\nx = 'ran'")
        assert out.status == "ok", out.error_text
        assert kernel.value("x") == "ran"
    finally:
        gate.touch()
        kernel.stop()


def test_a_chosen_cluster_that_goes_away_is_named_and_used_again_when_back(dask_processes):
    dask_processes.worker(name="first")
    kernel = connected_kernel(dask_processes.address)
    try:
        assert kernel.run("%%task\nx = 1").status == "ok"
        for proc in dask_processes.procs:
            proc.kill()
            proc.wait()
        out = kernel.run("%%task\nimport os\nx = os.environ['TASKCELL_WORKER_NAME']")
        assert out.status == "error"
        assert f"cannot reach the scheduler at {dask_processes.address}" in out.error_text
        assert kernel.value("x") == 1

        dask_processes.start_scheduler()
        dask_processes.worker(name="second")
        dask_processes.wait_for_workers(1)
        out = kernel.run("%%task\nimport os\nx = os.environ['TASKCELL_WORKER_NAME']")
        assert out.status == "ok", out.error_text
        assert kernel.value("x") == "second"
    finally:
        kernel.stop()


def test_task_cells_in_a_row_across_a_scheduler_restart_still_show_their_output(dask_processes):
    """No plain cell between them: the kernel's subscription to its cells' events, kept while
    task cells follow one another, is made again on the new scheduler."""
    dask_processes.worker(name="first")
    dask_processes.wait_for_workers(1)
    kernel = KernelSession()
    try:
        out = kernel.run(f"%load_ext taskcell\n%task_cluster {dask_processes.address}")
        assert out.status == "ok", out.error_text
        assert kernel.run("%%task\nprint('before')").stdout == "before\n"
        for proc in dask_processes.procs:
            proc.kill()
            proc.wait()
        dask_processes.start_scheduler()
        dask_processes.worker(name="second")
        dask_processes.wait_for_workers(1)
        out = kernel.run("%%task\nprint('after')")
        assert out.status == "ok", out.error_text
        assert out.stdout == "after\n"
    finally:
        kernel.stop()


def test_a_killed_scheduler_is_named_not_called_a_cancellation(dask_processes):
    dask_processes.worker()
    kernel = connected_kernel(dask_processes.address, "kept = 'before'")
    try:
        msg_id = kernel.start("%%task\nimport time\nprint('started', flush=True)\ntime.sleep(60)")
        kernel.wait_for_print(msg_id, "started")
        dask_processes.scheduler.kill()
        out = kernel.wait(msg_id)
        assert out.of_type("error")[0]["content"]["ename"] == "ClusterError"
        assert f"lost the scheduler at {dask_processes.address}" in out.error_text
        assert "cancelled" not in out.error_text
        assert kernel.value("kept") == "before"
    finally:
        kernel.stop()


@pytest.fixture
def frozen_scheduler(dask_processes):
    """A cluster whose scheduler the test may stop with SIGSTOP; it is continued afterwards."""
    dask_processes.worker()
    try:
        yield dask_processes
    finally:
        os.kill(dask_processes.scheduler.pid, signal.SIGCONT)


def test_a_frozen_scheduler_ends_the_cell_after_the_timeout(frozen_scheduler):
    kernel = connected_kernel(
        frozen_scheduler.address, "dask.config.set({'taskcell.scheduler-timeout': '3s'})"
    )
    try:
        msg_id = kernel.start("%%task\nimport time\nprint('started', flush=True)\ntime.sleep(60)")
        kernel.wait_for_print(msg_id, "started")
        os.kill(frozen_scheduler.scheduler.pid, signal.SIGSTOP)
        out = kernel.wait(msg_id, timeout=90)
        assert out.of_type("error")[0]["content"]["ename"] == "ClusterError"
        assert f"the scheduler at {frozen_scheduler.address} has not answered" in out.error_text
        assert "taskcell.scheduler-timeout is 3 s" in out.error_text
    finally:
        kernel.stop()


def test_the_first_interrupt_ends_the_cell_whatever_the_scheduler_does(frozen_scheduler):
    kernel = connected_kernel(
        frozen_scheduler.address, "dask.config.set({'taskcell.scheduler-timeout': '1h'})"
    )
    try:
        msg_id = kernel.start("%%task\nimport time\nprint('started', flush=True)\ntime.sleep(60)")
        kernel.wait_for_print(msg_id, "started")
        os.kill(frozen_scheduler.scheduler.pid, signal.SIGSTOP)
        kernel.manager.interrupt_kernel()
        out = kernel.wait(msg_id, timeout=90)
        assert out.of_type("error")[0]["content"]["ename"] == "KeyboardInterrupt"
        shown = "\n".join(str(d.get("text/plain")) for d in out.displays)
        assert f"the scheduler at {frozen_scheduler.address} did not answer" in shown
    finally:
        kernel.stop()


def test_a_cell_that_ignores_the_interrupt_is_ended_and_its_worker_shown_busy_meanwhile(
    dask_processes, tmp_path
):
    dask_processes.worker("--resources", "slot=1")
    kernel = connected_kernel(
        dask_processes.address, "dask.config.set({'taskcell.interrupt-grace': '2s'})"
    )
    pid_file = tmp_path / "pid"
    try:
        msg_id = kernel.start(
            cell(f"""
            %%task --resources slot=1 --name stubborn
            import os, signal, time
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            open({str(pid_file)!r}, "w").write(str(os.getpid()))
            print("started", flush=True)
            time.sleep(600)
        """)
        )
        kernel.wait_for_print(msg_id, "started")
        pid = int(pid_file.read_text())
        kernel.manager.interrupt_kernel()
        out = kernel.wait(msg_id)
        assert out.of_type("error")[0]["content"]["ename"] == "KeyboardInterrupt"

        from distributed import Client

        with Client(dask_processes.address) as client:

            def slot_in_use() -> bool:
                return any(
                    w["metrics"]["task_counts"].get("executing", 0)
                    for w in client.scheduler_info()["workers"].values()
                ) or any(client.processing().values())

            while True:  # the scheduler never calls the worker free while the cell still runs
                in_use = slot_in_use()
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                assert in_use, "the cell's process still runs but its worker is shown free"
                time.sleep(0.1)
        again = kernel.run("%%task --resources slot=1\nafter = 'ran'")
        assert again.status == "ok", again.error_text
        kernel.run("tasks = %tasks")
        assert ("stubborn", "interrupted") in kernel.value("list(zip(tasks.cell, tasks.state))")
    finally:
        kernel.stop()


def test_errors_carry_the_users_exception_name_and_the_cells_number(dask_processes):
    dask_processes.worker()
    kernel = connected_kernel(dask_processes.address)
    try:
        out = kernel.run("%%task\nvalue = 1\nraise ValueError('bad batch')")
        error = out.of_type("error")[0]["content"]
        assert error["ename"] == "ValueError"
        count = out.of_type("execute_input")[0]["content"]["execution_count"]
        assert f'<cell In[{count}]>", line 3' in "\n".join(error["traceback"])
        kernel.run("tasks = %tasks")
        assert f"cell-{count}" in kernel.value("list(tasks.cell)")
        caught = kernel.run(
            "try:\n    get_ipython().run_cell_magic('task', '', 'raise KeyError(3)')\n"
            "except KeyError:\n    print('caught as KeyError')"
        )
        assert "caught as KeyError" in caught.stdout
    finally:
        kernel.stop()


def test_ten_thousand_prints_arrive_whole_in_order_in_few_events(dask_processes):
    dask_processes.worker()
    kernel = connected_kernel(dask_processes.address)
    try:
        out = kernel.run("%%task\nfor i in range(10_000):\n    print('line', i)")
        assert out.status == "ok", out.error_text
        assert out.stdout == "".join(f"line {i}\n" for i in range(10_000))
        from distributed import Client

        with Client(dask_processes.address) as client:
            events = [
                event
                for topic in client.get_events().values()
                for _, event in topic
                if isinstance(event, dict) and event.get("kind") == "stream"
            ]
        assert 0 < len(events) < 1_000
    finally:
        kernel.stop()


@pytest.mark.parametrize(
    "setup, kind",
    [
        ("value = threading.Lock()", "lock"),
        ("value = [threading.Lock(), bytes(2 * 2**20)]", "list"),
        ("value = Rebuilt()", "Rebuilt"),
        ("value = Rebuilt(2 * 2**20)", "Rebuilt"),
    ],
    ids=["unpicklable", "unpicklable-large", "does-not-unpickle", "does-not-unpickle-large"],
)
def test_an_input_that_cannot_travel_is_named_in_one_line_and_nothing_runs(
    dask_processes, setup, kind
):
    dask_processes.worker()
    kernel = connected_kernel(
        dask_processes.address,
        cell("""
            import threading
            def refuse(size):
                raise RuntimeError("cannot be rebuilt")
            class Rebuilt:
                def __init__(self, size=10):
                    self.data = bytes(size)
                def __reduce__(self):
                    return refuse, (len(self.data),)
            touched = False
        """),
    )
    try:
        kernel.run(setup)
        out = kernel.run("%%task\ntouched = True\nheld = value")
        error = out.of_type("error")[0]["content"]
        assert error["ename"] == "InputError"
        assert len(error["traceback"]) == 1, error["traceback"]
        assert f"input 'value' ({kind}) cannot be sent to a worker" in error["traceback"][0]
        assert kernel.value("touched") is False
    finally:
        kernel.stop()


def test_a_frozen_scheduler_while_the_result_comes_back_ends_the_cell_in_one_line(
    frozen_scheduler, tmp_path
):
    kernel = connected_kernel(
        frozen_scheduler.address, "dask.config.set({'taskcell.scheduler-timeout': '3s'})"
    )
    code, marker, gate = held_result(tmp_path)
    try:
        msg_id = kernel.start(code)
        eventually(lambda: os.path.exists(marker), "the kernel to be fetching the cell's result")
        os.kill(frozen_scheduler.scheduler.pid, signal.SIGSTOP)
        out = kernel.wait(msg_id, timeout=90)
        assert out.of_type("error")[0]["content"]["ename"] == "ClusterError"
        assert "has not answered" in out.error_text
        assert "nothing was written back" in out.error_text
        assert len(out.error_text.strip().splitlines()) <= 2  # the line, and IPython's name
    finally:
        open(gate, "w").close()
        os.kill(frozen_scheduler.scheduler.pid, signal.SIGCONT)
    try:
        assert kernel.value("'held' in globals()") is False
    finally:
        kernel.stop()


def test_a_worker_that_answers_slowly_while_the_result_comes_back_is_waited_for(
    dask_processes, tmp_path
):
    """The worker answers each question about itself 3 s late (slower than a look at it) while
    the kernel is fetching the result, for longer than the timeout (15 s: five times an answer,
    so a loaded machine's delays do not make it silent): slow is not dead, the result is
    bound."""
    from distributed import Client

    dask_processes.worker()
    kernel = connected_kernel(
        dask_processes.address, "dask.config.set({'taskcell.scheduler-timeout': '15s'})"
    )
    code, marker, gate = held_result(tmp_path)
    answers = tmp_path / "answers"

    def slow_identity(path, dask_worker=None):
        import asyncio

        original = dask_worker.handlers["identity"]

        async def identity(*args, **kwargs):
            await asyncio.sleep(3)
            with open(path, "a") as counted:
                counted.write(".")
            return original(*args, **kwargs)

        dask_worker.handlers["identity"] = identity

    try:
        msg_id = kernel.start(code)
        eventually(lambda: os.path.exists(marker), "the kernel to be fetching the cell's result")
        with Client(dask_processes.address) as client:
            client.run(slow_identity, str(answers))
        eventually(
            lambda: answers.exists() and len(answers.read_text()) >= 6,
            "six late answers: longer than the 15 s timeout",
            timeout=180,
        )
        open(gate, "w").close()
        out = kernel.wait(msg_id, timeout=90)
        assert out.status == "ok", out.error_text
        assert kernel.value("type(held).__name__") == "Held"
    finally:
        open(gate, "w").close()
        kernel.stop()


def test_an_interrupt_while_the_result_comes_back_ends_the_cell_in_one_line(
    dask_processes, tmp_path
):
    dask_processes.worker()
    kernel = connected_kernel(dask_processes.address)
    code, marker, gate = held_result(tmp_path)
    try:
        msg_id = kernel.start(code)
        eventually(lambda: os.path.exists(marker), "the kernel to be fetching the cell's result")
        kernel.manager.interrupt_kernel()
        out = kernel.wait(msg_id, timeout=90)
        error = out.of_type("error")[0]["content"]
        assert error["ename"] == "KeyboardInterrupt"
        assert error["traceback"] == [
            "KeyboardInterrupt: the cell was interrupted while its result came back"
        ]
        open(gate, "w").close()
        assert kernel.value("'held' in globals()") is False
    finally:
        open(gate, "w").close()
        kernel.stop()


def test_the_cell_after_the_embedded_cluster_was_stopped_says_so_and_runs(embedded_kernel):
    """Stopped through its scheduler (the sidebar's Stop), the embedded cluster is replaced by
    the next cell, which says so in its status and shows none of Dask's reconnection log."""
    import asyncio

    from distributed.core import rpc

    from taskcell.cluster.embedded_control import STOP

    kernel = embedded_kernel
    assert kernel.run("%%task\nfirst = 1", timeout=120).status == "ok"
    address = kernel.value(
        "__import__('taskcell.cluster.connect', fromlist=['_']).current_client().scheduler.address"
    )

    async def stop() -> dict:
        async with rpc(address) as scheduler:
            return await getattr(scheduler, STOP)()

    assert asyncio.run(stop()) == {}
    out = kernel.run("%%task\nsecond = 2", timeout=120)
    assert out.status == "ok", out.error_text
    assert out.stderr == ""
    shown = "\n".join(str(d.get("text/plain")) for d in out.displays)
    assert f"the cluster at {address} was stopped" in shown
    assert kernel.value("second") == 2
