"""Which cluster a kernel records for the Jupyter server: the one the user chose, even when the
embedded cluster started in the background finishes its start after the choice (issue 22)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import DaskProcesses, KernelSession

pytestmark = pytest.mark.slow


class NamedKernel(KernelSession):
    """A kernel whose connection file is named as Jupyter's server names it,
    ``kernel-<id>.json``, so it records its cluster under that id (``kernel-race``)."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        super().__init__(env, connection_file=str(folder / "kernel-race.json"))


#: The embedded cluster's start, held by a gate once its scheduler listens, as a start that
#: finishes after the user's choice; closing it is left to the end, so that its client can
#: still connect when the gate opens.
GATED_START = """
%load_ext taskcell
import threading
from taskcell.cluster import connect, registry
from taskcell.cluster.embedded import EmbeddedCluster, worker_specs

gate = threading.Event()

class Gated:
    def __init__(self):
        self.real = EmbeddedCluster(worker_specs())
        self.n_workers = self.real.n_workers
    def address(self):
        address = self.real.address()
        gate.wait()
        return address
    def alive(self):
        return self.real.alive()
    def close(self):
        pass

gated = Gated()
embedded = connect.start_early(gated)
"""


def test_a_cluster_chosen_while_the_embedded_one_starts_is_the_one_recorded(
    dask_processes: DaskProcesses, tmp_path: Path
) -> None:
    env = {
        "JUPYTER_RUNTIME_DIR": str(tmp_path),
        "DASK_TASKCELL__EMBEDDED_CLUSTER__START_EARLY": "0",
    }
    kernel = NamedKernel(tmp_path, env)
    try:
        out = kernel.run(GATED_START)
        assert out.status == "ok", out.error_text
        out = kernel.run(f"%task_cluster {dask_processes.address}")
        assert out.status == "ok", out.error_text
        # Now the embedded start goes on: its scheduler answers, and it ends its start.
        out = kernel.run("gate.set()\nleft = embedded.started()", timeout=120)
        assert out.status == "ok", out.error_text
        # The Jupyter server reads the chosen cluster, and the kernel submits there.
        assert kernel.value("registry.recorded()") == {"race": dask_processes.address}
        assert kernel.value("connect.current_client().scheduler.address") == dask_processes.address
        assert kernel.value("left is None")  # the embedded start closed its client
    finally:
        kernel.run("gated.real.close()")
        kernel.stop()
