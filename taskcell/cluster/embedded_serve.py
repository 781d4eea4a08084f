"""The embedded cluster's process, ``python -m taskcell.cluster.embedded_serve [--tls=yes|no]
[SPEC]``, which :class:`~taskcell.cluster.embedded.EmbeddedCluster` starts (see
:mod:`taskcell.cluster.embedded`): it runs the ``SpecCluster`` of
:mod:`~taskcell.cluster.embedded_worker`'s workers, scaled and stopped by
:mod:`~taskcell.cluster.embedded_control`, until stdin closes.

It sits above those modules, which it puts together. Dask is imported only once the worker
processes are started, so that they import it meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import logging
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

from taskcell.cluster.embedded import (
    HOST,
    NAME,
    hand_credentials,
    keep_credentials,
    security_from,
    spawn_worker,
    temporary_credentials,
    wants_tls,
    worker_specs,
)
from taskcell.cluster.sessions import forget_the_kernels_interrupt
from taskcell.errors import ClusterError, SpecError


def serve(workers: dict[str, dict[str, Any]] | None, tls: bool | None = None) -> None:
    """Run the cluster until stdin closes (the child's side of ``EmbeddedCluster``)."""
    forget_the_kernels_interrupt()
    if workers is None:
        declined = _declined()
        if declined:
            print(json.dumps({"declined": declined}), flush=True)
            return
        workers = worker_specs()
    try:
        tls = wants_tls() if tls is None else tls
    except Exception as e:  # a bad taskcell.embedded-cluster.tls: the kernel says why
        print(json.dumps({"declined": str(e)}), flush=True)
        return
    port = _free_port()
    address = f"{'tls' if tls else 'tcp'}://{HOST}:{port}"
    started = {}
    if len(workers) == 1:
        os.environ.update(next(iter(workers.values())).get("env") or {})
    else:
        started = {name: spawn_worker(address, name, o) for name, o in workers.items()}
    kept = None
    try:
        made = _credentials_for(address, tls)
        if made is None:
            return
        for proc in started.values():
            hand_credentials(proc, made or None)
        if made:  # the sidebar's copy: without it the kernel still has its own
            with contextlib.suppress(OSError):
                kept = keep_credentials(address, made)
        asyncio.run(run_cluster(port, workers, started, made or None))
    finally:
        for proc in started.values():  # any the cluster did not adopt
            proc.kill()
        if kept is not None:
            kept.unlink(missing_ok=True)


async def run_cluster(
    port: int,
    workers: dict[str, dict[str, Any]],
    started: dict[str, subprocess.Popen[bytes]],
    credentials: dict[str, str] | None = None,
) -> None:
    """Serve the cluster on ``port`` until stdin closes or it is stopped through its scheduler
    (:mod:`~taskcell.cluster.embedded_control`), adopting the ``started`` worker processes; a
    worker not started runs in this process. With ``credentials``, everything speaks TLS."""
    from distributed import Scheduler, SpecCluster, Worker

    from taskcell.cluster.embedded_control import EmbeddedControls
    from taskcell.cluster.embedded_worker import EmbeddedWorker, expect_workers

    expect_workers(started, credentials)
    security = security_from(credentials) if credentials else None
    specs: dict[str, dict[str, Any]] = {
        name: {"cls": EmbeddedWorker, "options": dict(o)} for name, o in workers.items()
    }
    own = {"dashboard": False, "host": HOST, "security": security}
    for name in set(workers) - set(started):
        options = {k: v for k, v in workers[name].items() if k != "env"}
        specs[name] = {"cls": Worker, "options": {**options, **own}}
    started.clear()
    # The dashboard (bokeh) takes longer to import than the rest of the cluster to start: it
    # is added once the cluster is up, its page served on the port the scheduler opened.
    options = {"host": HOST, "port": port, "dashboard_address": f"{HOST}:0"}
    protocol = "tls" if security else "tcp"
    scheduler = {
        "cls": Scheduler,
        "options": {**options, "dashboard": False, "protocol": protocol, "security": security},
    }
    async with SpecCluster(
        workers=specs,
        scheduler=scheduler,
        name=NAME,
        asynchronous=True,
        silence_logs=logging.CRITICAL,
        security=security,
    ) as cluster:
        ended = asyncio.Event()
        EmbeddedControls(cluster, next(iter(workers.values())), ended.set).install()
        said = {
            "address": cluster.scheduler_address,
            "workers": len(workers),
            "tls": credentials,
        }
        print(json.dumps(said), flush=True)
        dashboard = asyncio.ensure_future(_add_dashboard(cluster.scheduler))
        _when_stdin_closes(ended.set)
        await ended.wait()
        dashboard.cancel()


def _declined() -> str | None:
    """Why the child of an early start does not start a cluster: its config names one, or
    turns early starts off."""
    import dask.config

    from taskcell import config

    address = dask.config.get("scheduler-address", None)
    if address:
        return f"Dask's scheduler-address is {address}"
    try:
        early = config.flag("embedded-cluster.start-early")
    except SpecError as e:  # as when it is off: the first %%task starts the cluster
        return str(e)
    if not early:
        return "taskcell.embedded-cluster.start-early is off"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _credentials_for(address: str, tls: bool) -> dict[str, str] | None:
    """The credentials of a TLS cluster ({} for a plain one); None, said on stdout for the
    kernel, where they cannot be made."""
    if not tls:
        return {}
    try:
        return temporary_credentials()
    except ClusterError as e:
        print(json.dumps({"declined": str(e)}), flush=True)
        return None


def _when_stdin_closes(callback: Callable[[], None]) -> None:
    """Call ``callback`` on the running loop once stdin closes (the kernel closed it, or died).
    The reading thread is a daemon, so that a cluster stopped through its scheduler need not
    wait for it; it reads the descriptor, not ``sys.stdin``, whose lock it would hold while the
    interpreter ends."""
    loop = asyncio.get_running_loop()

    def read() -> None:
        while os.read(sys.stdin.fileno(), 1 << 16):
            pass
        loop.call_soon_threadsafe(callback)

    threading.Thread(target=read, name="taskcell-embedded-stdin", daemon=True).start()


async def _add_dashboard(scheduler: Any) -> None:
    """Serve the scheduler's dashboard pages, importing bokeh in a thread meanwhile."""
    try:
        dashboard = await asyncio.to_thread(
            importlib.import_module, "distributed.dashboard.scheduler"
        )
    except ImportError:  # no bokeh, no dashboard (as for any Dask scheduler)
        return
    dashboard.connect(scheduler.http_application, scheduler.http_server, scheduler, prefix="/")


def _main(argv: list[str]) -> None:
    """``python -m taskcell.cluster.embedded_serve [--tls=yes|no] [SPEC]``."""
    said = [arg for arg in argv if arg.startswith("--tls=")]
    rest = [arg for arg in argv if not arg.startswith("--tls=")]
    tls = said[-1] == "--tls=yes" if said else None
    serve(json.loads(rest[0]) if rest else None, tls)


if __name__ == "__main__":
    _main(sys.argv[1:])
