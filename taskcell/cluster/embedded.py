"""The embedded cluster: a scheduler and worker processes on this machine, in a session apart.

jupyter_client interrupts a kernel by signalling its whole process group, so a cluster started
inside the kernel's group would die at the first ■ (interrupt). The cluster therefore runs in a
child process that starts a new session (:mod:`taskcell.cluster.embedded_serve`): an
interrupt reaches only the kernel, which then stops the one cell it means to stop. The child
runs a ``SpecCluster`` named :data:`NAME`, prints the scheduler's address as soon as the
scheduler listens, and ends the cluster when the kernel closes its stdin, which also happens
when the kernel dies, or when it is stopped through its scheduler: the sidebar scales and
stops it there (:mod:`taskcell.cluster.embedded_control`), and the kernel starts a new one at
its next ``%%task``.

One worker (the default, ``taskcell.embedded-cluster.n-workers``) runs in the child process
itself, beside the scheduler: cells run in processes of their own anyway, and the cluster is up
once one process has imported Dask, while the kernel imports it too. Several workers each get a
process, with its own ``CUDA_VISIBLE_DEVICES``, started first, before the child imports Dask, so
that they import it while it does; each waits for the scheduler's port, then connects (see
:mod:`taskcell.cluster.embedded_worker`, which also starts a worker again when it exits).
Its scheduler, dashboard and workers listen on :data:`HOST` (127.0.0.1) only: a Dask worker runs
any code sent to it, and none of this is meant for another machine.

Where Dask's ``distributed.comm.require-encryption`` or ``taskcell.embedded-cluster.tls`` is set
(:func:`wants_tls`), the cluster speaks TLS (``tls://127.0.0.1:PORT``) with a certificate made
for it when it starts (``Security.temporary()``). The certificate and its key travel only
through pipes (the child's stdout to the kernel, each worker process's stdin) and a file only
this user can read, for the Jupyter server's sidebar (:func:`kept_security`), removed when the
cluster ends.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pathlib
import select
import subprocess
import sys
import tempfile
import threading
from typing import TYPE_CHECKING, Any

from taskcell.cluster.sessions import popen_apart
from taskcell.errors import ClusterError

if TYPE_CHECKING:
    from distributed.security import Security

#: The name of the embedded cluster's ``SpecCluster``.
NAME = "taskcell-embedded"
#: The one interface everything of the embedded cluster listens on: nothing beyond this machine.
HOST = "127.0.0.1"


class EmbeddedCluster:
    """The child process running the embedded cluster; :meth:`address` waits for its scheduler.

    Starting it returns at once: the caller waits for the address (in a thread of its own, see
    :mod:`taskcell.cluster.connect`), and :meth:`close` may end the cluster at any moment, its
    start included.
    """

    def __init__(
        self, workers: dict[str, dict[str, Any]] | None = None, tls: bool | None = None
    ) -> None:
        """Start the cluster with ``workers``: worker name -> worker options (JSON-able:
        nthreads, memory_limit, resources, env). None: the child reads them from its own
        Dask config (as :func:`worker_specs`), so this process need not import Dask first,
        and declines to start where that config names a scheduler. ``tls``: whether it
        speaks TLS; None: as the child's own config says (:func:`wants_tls`)."""
        spec = [] if workers is None else [json.dumps(workers)]
        said_tls = [] if tls is None else [f"--tls={'yes' if tls else 'no'}"]
        self.proc = popen_apart(
            [sys.executable, "-m", "taskcell.cluster.embedded_serve", *said_tls, *spec],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self.n_workers = 0 if workers is None else len(workers)
        #: The ``Security`` a client of a TLS cluster needs (known with :meth:`address`).
        self.security: Security | None = None
        self._address: str | None = None
        self._ending = False
        self._reading = threading.Lock()

    def address(self) -> str:
        """The scheduler's address, once it listens (blocks until then); ClusterError if the
        cluster ended, or declined to start, before."""
        with self._reading:
            if self._address is None:
                line = self.proc.stdout.readline() if self.proc.stdout else b""
                said = json.loads(line) if line else {}
                if "address" not in said:
                    code = self.proc.wait()
                    why = said.get("declined") or f"exit code {code}"
                    raise ClusterError(f"the embedded cluster did not start ({why})")
                self._address, self.n_workers = str(said["address"]), int(said["workers"])
                if said.get("tls"):
                    self.security = security_from(said["tls"])
        return self._address

    @property
    def scheduler_address(self) -> str:
        """The scheduler's address (waits for it, as :meth:`address`)."""
        return self.address()

    def alive(self) -> bool:
        """Running, and not ending: a cluster stopped through its scheduler says so on its
        stdout (:func:`announce_stop`) before it answers, so a cell run after the sidebar heard
        the answer starts a new cluster rather than meet this one closing."""
        if self._ending or self.proc.poll() is not None:
            return False
        stdout = self.proc.stdout
        if self._address is not None and stdout and select.select([stdout], [], [], 0)[0]:
            self._ending = True  # the notice, or the end of the pipe: nothing else comes
        return not self._ending

    def close(self) -> None:
        """Stop the scheduler and its workers, and wait for them."""
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def worker_specs() -> dict[str, dict[str, Any]]:
    """The embedded cluster's workers: this machine's cores, memory and GPUs split between
    ``taskcell.embedded-cluster.n-workers`` of them (worker name -> options)."""
    from taskcell import config
    from taskcell.cluster.detect import advertised_resources, detect_machine

    n = config.count("embedded-cluster.n-workers") or 1
    threads = config.count("embedded-cluster.threads-per-worker")
    shares = advertised_resources(detect_machine(), n)
    return {
        f"taskcell-{i}": {
            "nthreads": threads or max(1, int(share.resources.get("CPU", 1))),
            "memory_limit": int(share.resources.get("MEMORY", 0)) or "auto",
            "resources": share.resources,
            "env": share.environ(),
        }
        for i, share in enumerate(shares)
    }


def wants_tls() -> bool:
    """Whether the embedded cluster speaks TLS: always where Dask's
    ``distributed.comm.require-encryption`` is set (a plain one could not be used), else as
    ``taskcell.embedded-cluster.tls`` says."""
    import dask.config

    from taskcell import config

    return bool(dask.config.get("distributed.comm.require-encryption", False)) or config.flag(
        "embedded-cluster.tls"
    )


def temporary_credentials() -> dict[str, str]:
    """A certificate made for one cluster, its key and its CA (itself), as PEM text:
    ``{"ca", "cert", "key"}``. ClusterError naming the package where cryptography is missing."""
    from distributed.security import Security

    try:
        made = Security.temporary()
    except ImportError:
        raise ClusterError(
            "the embedded cluster speaks TLS (distributed.comm.require-encryption or "
            "taskcell.embedded-cluster.tls is set) and its certificate is made with the "
            'cryptography package, which is not installed: pip install "taskcell[tls]"'
        ) from None
    return {"ca": made.tls_ca_file, "cert": made.tls_client_cert, "key": made.tls_client_key}


def security_from(credentials: dict[str, str]) -> Security:
    """The ``Security`` of every role (client, scheduler, worker) with ``credentials``."""
    from distributed.security import Security

    cert, key = credentials["cert"], credentials["key"]
    roles = {
        f"tls_{role}_{part}": value
        for role in ("client", "scheduler", "worker")
        for part, value in (("cert", cert), ("key", key))
    }
    return Security(require_encryption=True, tls_ca_file=credentials["ca"], **roles)


def _credentials_file(address: str) -> pathlib.Path:
    """Where the credentials of the cluster at ``address`` are kept for the Jupyter server."""
    from taskcell.cluster.registry import registry_dir

    name = hashlib.sha256(address.encode()).hexdigest()[:16]
    return registry_dir() / "tls" / f"{name}.json"


def keep_credentials(address: str, credentials: dict[str, str]) -> pathlib.Path:
    """Write ``credentials`` where the Jupyter server finds them for ``address``, readable by
    this user alone (the folder too)."""
    path = _credentials_file(address)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")  # mode 0600
    with os.fdopen(fd, "w") as f:
        json.dump({"address": address, **credentials}, f)
    os.replace(tmp, path)
    return path


def kept_security(address: str) -> Security | None:
    """The ``Security`` of the embedded TLS cluster at ``address``, as its process left it for
    the Jupyter server; None where there is none (a file another user could write is ignored)."""
    path = _credentials_file(address)
    try:
        if path.stat().st_uid != os.getuid() or path.stat().st_mode & 0o077:
            return None
        said = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(said, dict) or said.get("address") != address:
        return None
    return security_from(said)


def announce_stop() -> None:
    """In the child: tell the kernel the cluster ends, stopped through its scheduler."""
    print(json.dumps({"stopping": True}), flush=True)


def spawn_worker(address: str, name: str, options: dict[str, Any]) -> subprocess.Popen[bytes]:
    """Start one worker process of the cluster at ``address`` (it waits for the scheduler, and
    for :func:`hand_credentials` on its stdin)."""
    spec = json.dumps({**options, "name": name})
    return subprocess.Popen(
        [sys.executable, "-m", "taskcell.cluster.embedded_worker", address, spec],
        env={**os.environ, **(options.get("env") or {})},
        stdin=subprocess.PIPE,
    )


def hand_credentials(proc: subprocess.Popen[bytes], credentials: dict[str, str] | None) -> None:
    """Give a worker process its TLS credentials (None: it speaks plain TCP) on its stdin, the
    one line it reads there; a process that already ended is left be."""
    if proc.stdin is None:
        return
    with contextlib.suppress(OSError):  # BrokenPipeError: it ended
        proc.stdin.write(json.dumps(credentials).encode() + b"\n")
        proc.stdin.close()
