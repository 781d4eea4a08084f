"""`taskcell worker` (taskcell.cluster.worker_cli)."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from waiting import eventually

from taskcell.cluster import worker_cli
from taskcell.cluster.worker_cli import WorkerCommand, main, parse_resources, run_workers
from taskcell.errors import SpecError
from taskcell.runner.task_line import parse_task_line

RECORDED = Path(__file__).parent / "recorded"
SCHEDULER = "tcp://10.0.0.1:8786"


def install_fake_nvidia_smi(tmp_path: Path, shape: str) -> dict[str, str]:
    """Environment variables that put the recorded-output nvidia-smi of ``shape`` on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "nvidia-smi"
    shutil.copy(RECORDED / "nvidia-smi", fake)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "FAKE_NVIDIA_SMI_DIR": str(RECORDED / shape),
    }


@pytest.fixture
def fake_gpus(tmp_path, monkeypatch):
    """Use the fake nvidia-smi of a shape, with pynvml hidden: ``fake_gpus("h100x8")``."""

    def use(shape: str) -> None:
        for key, value in install_fake_nvidia_smi(tmp_path, shape).items():
            monkeypatch.setenv(key, value)
        monkeypatch.setitem(sys.modules, "pynvml", None)

    return use


def dry_run(capsys, *args: str) -> list[tuple[dict[str, str], list[str]]]:
    """Run ``taskcell worker --dry-run``; each line as (environment, argv)."""
    assert main(["--dry-run", *args]) == 0
    lines = []
    for line in capsys.readouterr().out.splitlines():
        words = shlex.split(line)
        env = {}
        while "=" in words[0] and not words[0].startswith("/"):
            key, _, value = words.pop(0).partition("=")
            env[key] = value
        lines.append((env, words))
    return lines


def option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def resources(argv: list[str]) -> dict[str, float]:
    return parse_resources(option(argv, "--resources"))


# --- dry runs -----------------------------------------------------------------------------------


def test_dry_run_splits_eight_h100_between_two_workers(fake_gpus, capsys):
    fake_gpus("h100x8")
    (env0, argv0), (env1, argv1) = dry_run(capsys, SCHEDULER, "--nworkers", "2")
    assert env0 == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    assert env1 == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "4,5,6,7"}
    for argv in (argv0, argv1):
        assert argv[:4] == [sys.executable, "-m", "distributed.cli.dask_worker", SCHEDULER]
        assert option(argv, "--nworkers") == "1"
        advertised = resources(argv)
        assert advertised["GPU"] == 4
        assert advertised["GPU-H100"] == 4
        assert advertised["CPU"] >= 1
        assert int(option(argv, "--nthreads")) == advertised["CPU"]
        assert int(option(argv, "--memory-limit")) == advertised["MEMORY"] > 0
        assert "--local-directory" not in argv
        assert "--name" not in argv


def test_dry_run_mig_slices(fake_gpus, capsys):
    fake_gpus("a100-mig")
    ((env, argv),) = dry_run(capsys, SCHEDULER)
    assert env["CUDA_VISIBLE_DEVICES"].count("MIG-") == 4
    advertised = resources(argv)
    assert "GPU" not in advertised
    assert advertised["MIG-A100-1g.5gb"] == 2
    assert advertised["MIG-A100-3g.20gb"] == 1


def test_dry_run_options_and_passthrough(fake_gpus, capsys, tmp_path):
    fake_gpus("t4")
    lines = dry_run(
        capsys,
        SCHEDULER,
        "--nworkers=2",
        "--nthreads",
        "3",
        "--scratch",
        str(tmp_path),
        "--name",
        "gpu01",
        "--resources",
        "process=1, gpu=2",
        "--",
        "--no-nanny",
        "--death-timeout",
        "60",
    )
    (env0, argv0), (env1, argv1) = lines
    assert (env0["CUDA_VISIBLE_DEVICES"], env1["CUDA_VISIBLE_DEVICES"]) == ("0", "")
    assert [option(argv, "--name") for argv in (argv0, argv1)] == ["gpu01-0", "gpu01-1"]
    for argv in (argv0, argv1):
        assert option(argv, "--nthreads") == "3"
        assert option(argv, "--local-directory") == str(tmp_path)
        assert argv[-3:] == ["--no-nanny", "--death-timeout", "60"]
        assert resources(argv)["process"] == 1
        assert resources(argv)["DISK"] > 0
    # the user's gpu=2 replaces the detected GPU, whatever the case
    assert "GPU" not in resources(argv0)
    assert resources(argv0)["gpu"] == 2
    assert resources(argv0)["GPU-T4"] == 1
    assert "GPU-T4" not in resources(argv1)


def test_dry_run_without_gpus_leaves_environment_alone(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setitem(sys.modules, "pynvml", None)
    ((env, argv),) = dry_run(capsys, SCHEDULER, "--name", "cpu01")
    assert env == {}
    assert option(argv, "--name") == "cpu01"
    assert not any(key.startswith(("GPU", "MIG")) for key in resources(argv))


def test_scheduler_file_may_replace_the_address(fake_gpus, capsys):
    fake_gpus("t4")
    ((_, argv),) = dry_run(capsys, "--", "--scheduler-file", "/shared/scheduler.json")
    assert argv[3:5] == ["--nworkers", "1"]
    assert argv[-2:] == ["--scheduler-file", "/shared/scheduler.json"]


# --- where workers listen -----------------------------------------------------------------------


def test_workers_of_a_loopback_scheduler_listen_on_127_0_0_1_only(fake_gpus, capsys):
    fake_gpus("t4")
    ((_, argv),) = dry_run(capsys, "tcp://127.0.0.1:8786", "--", "--death-timeout", "60")
    assert option(argv, "--host") == "127.0.0.1"
    assert option(argv, "--dashboard-address") == "127.0.0.1:0"
    assert argv[-2:] == ["--death-timeout", "60"]  # the user's own stay last, unchanged


def test_workers_of_a_remote_scheduler_listen_on_the_interface_that_reaches_it(fake_gpus, capsys):
    from distributed.utils import get_ip

    fake_gpus("t4")
    ((_, argv),) = dry_run(capsys, SCHEDULER)
    assert option(argv, "--host") == get_ip("10.0.0.1")
    assert option(argv, "--dashboard-address") == f"{get_ip('10.0.0.1')}:0"


@pytest.mark.parametrize(
    ("theirs", "dashboard"),
    [
        (["--host", "0.0.0.0"], "0.0.0.0:0"),
        (["--host=10.1.2.3"], "10.1.2.3:0"),
        (["--listen-address", "tcp://0.0.0.0:9000", "--contact-address", "tcp://h:9000"],
         "0.0.0.0:0"),
        (["--listen-address", "tcp://:9000"], None),
        (["--host", "0.0.0.0", "--dashboard-address", ":8788"], ":8788"),
    ],
    ids=["host", "host=", "listen-and-contact", "listen-on-all", "their-dashboard"],
)  # fmt: skip
def test_a_users_own_address_options_are_kept_unchanged(fake_gpus, capsys, theirs, dashboard):
    fake_gpus("t4")
    ((_, argv),) = dry_run(capsys, "tcp://127.0.0.1:8786", "--", *theirs)
    assert argv[-len(theirs) :] == theirs
    ours = argv[: -len(theirs)]
    assert not {"--host", "--listen-address", "--contact-address"} & set(ours)
    if dashboard is None:
        assert "--dashboard-address" not in argv
    elif "--dashboard-address" not in theirs:
        assert option(ours, "--dashboard-address") == dashboard


def test_a_users_interface_is_kept_and_its_dashboard_follows_it(fake_gpus, capsys):
    fake_gpus("t4")
    ((_, argv),) = dry_run(capsys, SCHEDULER, "--", "--interface", "lo")
    assert "--host" not in argv
    assert option(argv, "--interface") == "lo"
    assert option(argv, "--dashboard-address") == "127.0.0.1:0"


def test_a_scheduler_file_is_read_for_the_interface(fake_gpus, capsys, tmp_path):
    fake_gpus("t4")
    scheduler_file = tmp_path / "scheduler.json"
    scheduler_file.write_text('{"address": "tcp://127.0.0.1:8786"}')
    ((_, argv),) = dry_run(capsys, "--", "--scheduler-file", str(scheduler_file))
    assert option(argv, "--host") == "127.0.0.1"


def test_tls_options_pass_through_to_every_worker(fake_gpus, capsys):
    fake_gpus("t4")
    tls = ["--tls-ca-file", "ca.pem", "--tls-cert", "cert.pem", "--tls-key", "key.pem"]
    for _, argv in dry_run(capsys, "tls://127.0.0.1:8786", "--nworkers", "2", "--", *tls):
        assert argv[-6:] == tls
        assert option(argv, "--host") == "127.0.0.1"


def said_on_start(capsys, *args: str) -> str:
    """What ``taskcell worker --dry-run ARGS`` says on stderr."""
    assert main(["--dry-run", *args]) == 0
    return capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "where", "how"),
    [
        (["tcp://127.0.0.1:8786"], "listen on 127.0.0.1 (the interface that reaches "
         "tcp://127.0.0.1:8786)", "; plain TCP, without TLS: whoever reaches it can run code"),
        (["tcp://127.0.0.1:8786", "--", "--host", "0.0.0.0"],
         "listen on all interfaces, 0.0.0.0 (as your own options after -- say)",
         "; plain TCP, without TLS"),
        (["tls://127.0.0.1:8786", "--", "--tls-ca-file", "ca.pem"], "listen on 127.0.0.1",
         "; over TLS"),
        (["tcp://127.0.0.1:8786", "--", "--tls-ca-file", "ca.pem"], "listen on 127.0.0.1",
         "; plain TCP, without TLS: your TLS options apply only to a tls:// scheduler"),
    ],
    ids=["loopback", "their-host", "tls", "tls-options-on-tcp"],
)  # fmt: skip
def test_it_says_on_start_where_it_listens_and_whether_over_tls(
    fake_gpus, capsys, args, where, how
):
    fake_gpus("t4")
    (line,) = said_on_start(capsys, *args).splitlines()
    assert line.startswith("taskcell worker: workers, their nannies and dashboards ")
    assert where in line
    assert how in line


# --- bad arguments ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            [SCHEDULER, "--nworkers", "0"],
            "argument --nworkers: expected a whole number of at least 1, got '0'",
        ),
        (
            [SCHEDULER, "--nworkers", "two"],
            "argument --nworkers: expected a whole number of at least 1, got 'two'",
        ),
        (
            [SCHEDULER, "--resources", "GPU=two"],
            "argument --resources: 'GPU' must be a number of 0 or more such as 1 or 70e9, "
            "got 'two'",
        ),
        ([SCHEDULER, "--resources", "GPU"], "got 'GPU'"),
        (
            [SCHEDULER, "--resources", "process=1,GPU=-1"],
            "'GPU' must be a number of 0 or more such as 1 or 70e9, got '-1' (a negative amount)",
        ),
        (
            [SCHEDULER, "--scratch", "/no/such/dir"],
            "argument --scratch: expected an existing directory, got '/no/such/dir'",
        ),
        ([], "expected a scheduler address such as tcp://"),
        (
            [SCHEDULER, "--no-nanny"],
            "unrecognized arguments: --no-nanny (options for dask worker go after --",
        ),
        ([SCHEDULER, "--", "--nworkers", "4"], "--nworkers cannot be passed to dask worker"),
        ([SCHEDULER, "--", "--resources=GPU=1"], "--resources cannot be passed to dask worker"),
    ],
    ids=[
        "nworkers-0",
        "nworkers-word",
        "resources-word",
        "resources-no-value",
        "resources-negative",
        "scratch-missing",
        "no-scheduler",
        "unknown-option",
        "passthrough-nworkers",
        "passthrough-resources",
    ],
)
def test_bad_arguments_exit_2_before_anything_starts(args, message, monkeypatch, capsys):
    def must_not_run(*args, **kwargs):
        raise AssertionError("nothing may be detected or started on bad arguments")

    monkeypatch.setattr(worker_cli, "detect_machine", must_not_run)
    monkeypatch.setattr(worker_cli, "run_workers", must_not_run)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: taskcell worker")
    assert "\ntaskcell worker: error: " in err
    assert message in err


def test_help_exits_0(capsys):
    assert main(["--help"]) == 0
    assert "--nworkers N" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("GPU=2", {"GPU": 2.0}),
        ("GPU=2,MEMORY=100e9", {"GPU": 2.0, "MEMORY": 100e9}),
        ("GPU=2 process=1", {"GPU": 2.0, "process": 1.0}),  # Dask's own spacing
        ("GPU=0.5,", {"GPU": 0.5}),
        ("", {}),
    ],
    ids=["one", "commas", "spaces", "trailing-comma", "empty"],
)
def test_parse_resources(text, parsed):
    assert parse_resources(text) == parsed


ONE_GRAMMAR = ["GPU=2,process=1", "GPU=2 MEMORY=100e9", "x=0.5,", "GPU=two", "process",
               "GPU=1,gpu=2", "x=1e400", "x=２", "a b=1", "x=1=2"]  # fmt: skip


@pytest.mark.parametrize("text", ONE_GRAMMAR, ids=ONE_GRAMMAR)
def test_a_worker_and_a_task_line_read_resources_by_one_grammar(text):
    # The same text gives the same amounts, or the same message but for the lower bound (a
    # worker may advertise 0), through both --resources.
    try:
        on_the_line: object = parse_task_line(f"--resources {shlex.quote(text)}").extra
    except SpecError as error:
        on_the_line = str(error).removeprefix("--resources: ")
    try:
        for_the_worker: object = parse_resources(text)
    except argparse.ArgumentTypeError as error:
        for_the_worker = str(error).replace("a number of 0 or more", "a positive number")
    assert on_the_line == for_the_worker


def test_only_a_worker_may_advertise_none_of_a_resource():
    assert parse_resources("process=0") == {"process": 0}
    with pytest.raises(SpecError, match="'process' must be a positive number"):
        parse_task_line("--resources process=0")
    with pytest.raises(argparse.ArgumentTypeError, match=r"got '-1' \(a negative amount\)"):
        parse_resources("process=-1")


# --- running workers (without Dask) -------------------------------------------------------------


def python(code: str) -> WorkerCommand:
    return WorkerCommand((sys.executable, "-c", code), {})


def test_run_workers_stops_the_others_when_one_fails(capsys):
    forever = python("import threading; threading.Event().wait()")  # ends only when stopped
    status = run_workers([forever, python("import sys; sys.exit(3)")], grace=10)
    assert status == 3
    assert "worker 1 exited with status 3; stopping the others" in capsys.readouterr().err


def test_run_workers_forwards_sigterm(tmp_path):
    ready = [tmp_path / "ready0", tmp_path / "ready1"]
    code = (
        "import signal, sys, time, pathlib\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
        "pathlib.Path(sys.argv[1]).touch()\n"
        "time.sleep(60)\n"
        "sys.exit(5)\n"
    )
    commands = [WorkerCommand((sys.executable, "-c", code, str(path)), {}) for path in ready]

    def stop_when_ready():
        try:
            eventually(lambda: all(path.exists() for path in ready), "both workers ready")
        finally:
            os.kill(os.getpid(), signal.SIGTERM)  # caught by run_workers and forwarded

    handler = signal.getsignal(signal.SIGTERM)
    threading.Thread(target=stop_when_ready, daemon=True).start()
    assert run_workers(commands, grace=10) == 0
    assert signal.getsignal(signal.SIGTERM) == handler  # restored


def test_run_workers_reports_a_signal_death_as_128_plus_n():
    assert run_workers([python("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")]) == 137


def test_run_workers_sets_the_environment():
    check = "import os, sys; sys.exit(0 if os.environ['CUDA_VISIBLE_DEVICES'] == '' else 4)"
    assert (
        run_workers([WorkerCommand((sys.executable, "-c", check), {"CUDA_VISIBLE_DEVICES": ""})])
        == 0
    )


# --- against a real scheduler -------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=30)


@pytest.mark.slow
def test_real_worker_advertises_and_pins_a_t4(tmp_path):
    from distributed import Client

    env = {**os.environ, **install_fake_nvidia_smi(tmp_path, "t4")}
    no_nvml = tmp_path / "no_nvml"
    no_nvml.mkdir()
    (no_nvml / "pynvml.py").write_text("raise ImportError('pynvml is hidden by this test')\n")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(no_nvml), env.get("PYTHONPATH")]))
    address = f"tcp://127.0.0.1:{free_port()}"
    logs = tmp_path / "logs"
    logs.mkdir()

    scheduler = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
         "--port", address.rsplit(":", 1)[1], "--no-dashboard"],
        stdout=subprocess.DEVNULL,
        stderr=(logs / "scheduler.log").open("wb"),
    )  # fmt: skip
    launcher = None
    try:
        launcher = subprocess.Popen(
            [sys.executable, "-m", "taskcell.cluster.worker_cli", address, "--nthreads", "1",
             "--scratch", str(tmp_path), "--name", "t4-box"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=(logs / "worker.log").open("wb"),
        )  # fmt: skip
        with Client(address, timeout="30s") as client:
            client.wait_for_workers(1, timeout=60)
            (worker,) = client.scheduler_info()["workers"].values()
            assert worker["name"] == "t4-box"
            advertised = worker["resources"]
            assert advertised["CPU"] >= 1
            assert advertised["MEMORY"] > 0
            assert advertised["GPU"] == 1
            assert advertised["GPU-T4"] == 1
            assert advertised["DISK"] > 0

            future = client.submit(
                lambda: os.environ.get("CUDA_VISIBLE_DEVICES"), resources={"GPU-T4": 1}, pure=False
            )
            assert future.result(timeout=30) == "0"

            launcher.send_signal(signal.SIGTERM)
            assert launcher.wait(timeout=60) == 0
            eventually(
                lambda: client.scheduler_info()["workers"],
                "the workers gone",
                holds=lambda workers: workers == {},
            )

        scheduler.terminate()
        assert scheduler.wait(timeout=30) is not None
    finally:
        if launcher is not None:
            stop(launcher)
        stop(scheduler)


def test_a_memory_limit_given_to_dask_worker_is_what_it_advertises(fake_gpus, capsys):
    """``-- --memory-limit 1GiB``: the worker may hold 1 GiB, so it advertises no more MEMORY,
    and the scheduler never places a larger request there."""
    ((_, argv),) = dry_run(capsys, SCHEDULER, "--", "--memory-limit", "1GiB")
    assert resources(argv)["MEMORY"] == 2**30
    assert argv[-2:] == ["--memory-limit", "1GiB"]


def test_a_memory_limit_dask_would_refuse_is_named_before_anything_starts(
    fake_gpus, monkeypatch, capsys
):
    monkeypatch.setattr(worker_cli, "run_workers", lambda *a, **k: 0)
    assert main([SCHEDULER, "--", "--memory-limit", "lots"]) == 2
    assert "lots" in capsys.readouterr().err
