"""A SLURM pool end to end: a real slurmctld and slurmd on 127.0.0.1 with a node of two A100s
(plain files stand in for the devices), dask-jobqueue's SLURM job as the pool's backend, and a
``%%task --gpu A100:1`` cell in a real kernel that starts its worker through ``sbatch``, runs
there, and sees it retire.

Needs Debian's ``slurm-wlm`` and ``munge`` (``make test`` installs them when run as root) and
root, which slurmd needs to start jobs; skipped with a message otherwise.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import KernelSession, free_port
from waiting import eventually

pytestmark = pytest.mark.slow

PATIENCE = 120.0
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue")


def _missing() -> str | None:
    missing = [name for name in DAEMONS if shutil.which(name) is None]
    if missing:
        return (
            f"no {', '.join(missing)} on PATH: install Debian's slurm-wlm and munge "
            "(make test does, as root)"
        )
    if os.geteuid() != 0:
        return "slurmd must run as root to start jobs"
    return None


class LocalSlurm:
    """munged, slurmctld and slurmd in a folder of their own, with one node ``tcnode``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.conf = folder / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.procs: list[subprocess.Popen] = []
        for name in ("state", "spool", "log", "jobs"):
            (folder / name).mkdir()
        self._write_config()
        self._start()

    def _write_config(self) -> None:
        folder, host = self.folder, socket.gethostname().split(".")[0]
        key = folder / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        for device in ("gpu0", "gpu1"):
            (folder / device).touch()
        (folder / "gres.conf").write_text(
            f"NodeName=tcnode Name=gpu Type=a100 File={folder}/gpu[0-1]\n"
        )
        self.conf.write_text(
            f"""\
ClusterName=taskcelltest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={folder}/munge.sock
CredType=cred/munge
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/log/slurmctld.log
SlurmdLogFile={folder}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
NodeName=tcnode NodeAddr=127.0.0.1 NodeHostname={host} CPUs=2 RealMemory=4000 Gres=gpu:a100:2
PartitionName=debug Nodes=tcnode Default=YES MaxTime=INFINITE State=UP
"""
        )

    def _start(self) -> None:
        folder = self.folder
        self._spawn(
            "munged",
            "--foreground",
            "--force",
            f"--key-file={folder}/munge.key",
            f"--socket={folder}/munge.sock",
            f"--pid-file={folder}/munged.pid",
            f"--seed-file={folder}/munged.seed",
            f"--log-file={folder}/log/munged.log",
        )
        self._wait(lambda: (folder / "munge.sock").exists(), "munged")
        self._spawn("slurmctld", "-D", "-i", "-f", str(self.conf))
        self._spawn("slurmd", "-D", "-N", "tcnode", "-f", str(self.conf))
        self._wait(lambda: self.run("sinfo", "-h", "-o", "%T").strip() == "idle", "an idle node")

    def _spawn(self, *argv: str) -> None:
        log = open(self.folder / "log" / f"{argv[0]}.out", "wb")  # noqa: SIM115
        self.procs.append(
            subprocess.Popen(argv, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        )

    def _wait(self, ready, what: str) -> None:
        def alive_and_ready() -> bool:
            for proc in self.procs:
                if proc.poll() is not None:
                    logs = "\n".join(p.read_text() for p in (self.folder / "log").iterdir())
                    raise RuntimeError(f"{proc.args[0]} exited ({proc.returncode}):\n{logs}")
            return ready()

        eventually(alive_and_ready, f"SLURM: {what}", PATIENCE, every=0.2)

    def run(self, *argv: str) -> str:
        """A SLURM command against this cluster; its stdout ('' when it fails)."""
        done = subprocess.run(argv, env=self.env, capture_output=True, text=True, check=False)
        return done.stdout if done.returncode == 0 else ""

    def job_state(self, job_id: str) -> str:
        return self.run("squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T").strip()

    def stop(self) -> None:
        self.run("scancel", "--partition", "debug")
        for proc in reversed(self.procs):
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def slurm(tmp_path_factory) -> Iterator[LocalSlurm]:
    reason = _missing()
    if reason:
        pytest.skip(f"taskcell: SLURM test skipped: {reason}")
    cluster = LocalSlurm(tmp_path_factory.mktemp("slurm"))
    try:
        yield cluster
    finally:
        cluster.stop()


def test_a_gpu_cell_provisions_a_slurm_worker_through_sbatch_which_retires(slurm, dask_processes):
    kernel = KernelSession(env={**slurm.env, "DASK_SCHEDULER_ADDRESS": dask_processes.address})
    pool = {
        "shape": {"cpu": 1, "memory": "1Gi", "gpu": "A100:2"},
        "backend": "slurm",
        "idle-timeout": "1s",
        "options": {
            "queue": "debug",
            "walltime": "00:30:00",
            "python": sys.executable,
            "log_directory": str(slurm.folder / "jobs"),
        },
    }
    try:
        out = kernel.run(
            "%load_ext taskcell\nimport dask\nfrom taskcell.cluster import connect, provision\n"
            f"dask.config.set({{'taskcell.pools': {{'a100x2': {pool!r}}}}})\n"
            "def workers():\n"
            "    return provision.pool_state(connect.current_client())[0]['workers']"
        )
        assert out.status == "ok", out.error_text
        out = kernel.run(
            "%%task --gpu A100:1\nimport os\n"
            "ran = (os.environ['TASKCELL_WORKER_NAME'], os.environ.get('SLURM_JOB_ID'))",
            timeout=PATIENCE,
        )
        assert out.status == "ok", out.error_text
        worker, job_id = kernel.value("ran")
        assert worker.startswith("a100x2-")
        assert kernel.value("workers()[0]['started']") == f"SLURM job {job_id}"
        shown = [d["text/plain"] for d in out.displays]
        assert any(
            re.fullmatch(
                rf"taskcell: starting a worker of pool a100x2 \(SLURM job {job_id}\): \d+ s", s
            )
            for s in shown
        ), shown
        script = next((slurm.folder / "jobs").glob("*.out"), None)
        assert script is not None  # the job ran and wrote its log where the pool said

        kernel.eventual_value(
            "workers()",
            "its worker retired",
            lambda workers: workers[0]["state"] == "retired",
            timeout=PATIENCE,
        )
        eventually(
            lambda: slurm.job_state(job_id),
            "its job to end",
            PATIENCE,
            holds=lambda state: state not in ("PENDING", "RUNNING", "COMPLETING"),
        )
    finally:
        kernel.stop()
