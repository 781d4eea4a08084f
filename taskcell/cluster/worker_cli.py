"""``taskcell worker SCHEDULER_ADDRESS``: start Dask workers that advertise what this machine has.

The machine is detected (:func:`taskcell.cluster.detect.detect_machine`) and split between
``--nworkers`` processes (:func:`taskcell.cluster.detect.advertised_resources`). Each share
becomes its own ``dask worker SCHEDULER --nworkers 1`` process, because each needs its own
``CUDA_VISIBLE_DEVICES``; ``dask worker --nworkers N`` would give every process the same
resources and the same GPUs. The launcher waits on its workers, forwards SIGINT and SIGTERM to
them, and exits with the first nonzero exit status among them (0 when all exit cleanly). When
one worker fails on its own, the others are stopped too, so that a supervisor sees the failure.

Workers run in their own session, so that Ctrl-C in a terminal reaches them once, through the
launcher (a second SIGINT makes ``dask worker`` quit without closing cleanly); on Linux they
also get SIGTERM should the launcher die without forwarding anything.

Examples
--------
.. code-block:: console

    $ taskcell worker tcp://10.0.0.1:8786 --nworkers 2 --dry-run
    CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=0,1,2,3 /usr/bin/python3 -m ...
    $ taskcell worker tcp://10.0.0.1:8786 --resources "process=1" -- --no-nanny

Each worker, its nanny and its dashboard listen on one interface: the one a connection to the
scheduler leaves from (127.0.0.1 for a scheduler on 127.0.0.1), not on all of them as
``dask worker`` does, unless the user's own ``--host``, ``--listen-address``,
``--contact-address`` or ``--interface`` after ``--`` says otherwise. The launcher says on
stderr where they listen and whether over TLS: Dask's TLS options (``-- --tls-ca-file CA
--tls-cert CERT --tls-key KEY``, or ``distributed.comm.tls.*`` in Dask's config) pass through.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from taskcell.cluster import names
from taskcell.cluster.detect import (
    WorkerShare,
    advertised_resources,
    cap_memory,
    detect_machine,
    memory_limit_option,
)
from taskcell.errors import SpecError
from taskcell.spec.resources import parse_resource_pairs, resource_key

__all__ = [
    "WorkerCommand",
    "binding_args",
    "build_parser",
    "exposure",
    "listen_host",
    "main",
    "parse_resources",
    "reaching_host",
    "worker_commands",
]

PROG = "taskcell worker"

#: ``dask worker`` options that would undo the split into one process per share.
REFUSED_PASSTHROUGH = ("--nworkers", "--nprocs", "--resources")

#: ``dask worker`` options that say where a worker listens: a user's own is used unchanged.
ADDRESS_OPTIONS = ("--host", "--listen-address", "--contact-address", "--interface")

#: The ``dask worker`` option that says where its dashboard listens (all interfaces by default).
DASHBOARD_ADDRESS = "--dashboard-address"

#: ``dask worker`` options that make its connections TLS.
TLS_OPTIONS = ("--tls-ca-file", "--tls-cert", "--tls-key")

#: Signals the launcher forwards to its workers.
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM)

#: Seconds workers get to close after being asked to stop, before they are killed.
STOP_GRACE = 30.0

_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class WorkerCommand:
    """One ``dask worker`` process to start."""

    argv: tuple[str, ...]
    #: Set on top of the launcher's environment (``CUDA_VISIBLE_DEVICES`` and friends).
    env: dict[str, str]

    def shell(self) -> str:
        """The command as one line of shell, with its environment in front."""
        assignments = [f"{key}={shlex.quote(value)}" for key, value in self.env.items()]
        return " ".join([*assignments, shlex.join(self.argv)])


# --- arguments ----------------------------------------------------------------------------------


def parse_resources(text: str) -> dict[str, int | float]:
    """Parse ``--resources`` by the grammar a ``%%task`` line's ``--resources`` has; 0 allowed.

    Raises
    ------
    argparse.ArgumentTypeError
        A pair is not ``NAME=NUMBER`` with a finite, non-negative number, or a name is given
        twice; the message is :func:`~taskcell.spec.resources.parse_resource_pairs`'s.

    Examples
    --------
    >>> parse_resources("GPU=2,MEMORY=100e9")
    {'GPU': 2, 'MEMORY': 100000000000}
    """
    try:
        return parse_resource_pairs(text, zero=True)
    except SpecError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``taskcell worker`` (its help is the command's manual)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=(
            "Start Dask workers that advertise this machine's cores, memory, GPUs (by type and "
            "MIG slice), /dev/shm and scratch disk as Dask resources, one process per share, "
            "each seeing only its own GPUs."
        ),
        epilog=(
            "Arguments after -- go to every `dask worker` unchanged, e.g. "
            "`taskcell worker tcp://10.0.0.1:8786 -- --no-nanny --death-timeout 60`. "
            "Workers, nannies and dashboards listen only on the interface that reaches the "
            "scheduler (127.0.0.1 for a local one) unless -- --host, --listen-address, "
            "--contact-address or --interface says otherwise; they speak plain TCP without TLS "
            "unless the scheduler's address is tls:// (certificates: -- --tls-ca-file CA "
            "--tls-cert CERT --tls-key KEY, or Dask's distributed.comm.tls.* config)."
        ),
    )
    parser.add_argument(
        "scheduler",
        nargs="?",
        metavar="SCHEDULER_ADDRESS",
        help="address of the Dask scheduler, e.g. tcp://10.0.0.1:8786 "
        "(may be left out when `-- --scheduler-file FILE` is given)",
    )
    parser.add_argument(
        "--nworkers",
        type=_positive_int,
        default=1,
        metavar="N",
        help="worker processes to split the machine between; each owns distinct GPUs (default: 1)",
    )
    parser.add_argument(
        "--nthreads",
        type=_positive_int,
        default=None,
        metavar="N",
        help="threads per worker process (default: its share of the cores)",
    )
    parser.add_argument(
        "--scratch",
        default=None,
        metavar="DIR",
        help="existing directory for worker files, whose free space is advertised as DISK "
        "(default: the system temporary directory)",
    )
    parser.add_argument(
        "--name",
        default=None,
        help="worker name; with several workers, NAME-0, NAME-1, ...",
    )
    parser.add_argument(
        "--resources",
        type=parse_resources,
        default={},
        metavar='"K=V,..."',
        help="extra abstract resources for every worker process, merged over the detected "
        'ones (a name replaces a detected one regardless of case), e.g. "process=1"',
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print each worker's command line, with its environment, and exit",
    )
    return parser


def _split_passthrough(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    argv = list(argv)
    if "--" in argv:
        at = argv.index("--")
        return argv[:at], argv[at + 1 :]
    return argv, []


def _given(args: Sequence[str], option: str) -> bool:
    return any(arg == option or arg.startswith(option + "=") for arg in args)


def _value(args: Sequence[str], option: str) -> str | None:
    """The last value ``args`` give ``option`` (``--option VALUE`` or ``--option=VALUE``)."""
    found = None
    for at, arg in enumerate(args):
        if arg.startswith(option + "="):
            found = arg.partition("=")[2]
        elif arg == option and at + 1 < len(args):
            found = args[at + 1]
    return found


def _refused(passthrough: Sequence[str]) -> str | None:
    for arg in passthrough:
        for option in REFUSED_PASSTHROUGH:
            if arg == option or arg.startswith(option + "="):
                return option
    return None


# --- where workers listen -----------------------------------------------------------------------


def reaching_host(scheduler: str | None) -> str:
    """The local address a connection to ``scheduler`` leaves from (127.0.0.1 for a loopback
    scheduler; the default route's without one), bracketed if IPv6: the one interface its
    workers need to listen on, as Dask's nanny chooses it for itself."""
    from distributed.comm import get_address_host
    from distributed.comm.addressing import unparse_host_port
    from distributed.utils import get_ip

    ip = get_ip(get_address_host(scheduler)) if scheduler else get_ip()
    return str(unparse_host_port(ip))


def _scheduler_in_file(passthrough: Sequence[str]) -> str | None:
    """The address in the ``--scheduler-file`` of ``passthrough``, if it can be read now."""
    path = _value(passthrough, "--scheduler-file")
    try:
        with open(path or "") as f:
            return str(json.load(f)["address"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _users_host(passthrough: Sequence[str]) -> str | None:
    """The host the user's own options bind ("" for all interfaces), or None if they name none
    that can be read (an interface without an IPv4 address, which ``dask worker`` refuses)."""
    from distributed.comm import get_address_host
    from distributed.comm.addressing import unparse_host_port
    from distributed.utils import get_ip_interface

    host = _value(passthrough, "--host")
    if host is not None:
        return host
    listen = _value(passthrough, "--listen-address")
    if listen is not None:
        try:
            found = get_address_host(listen)
        except ValueError:
            return None
        return str(unparse_host_port(found)) if found else ""
    interface = _value(passthrough, "--interface")
    try:
        return str(get_ip_interface(interface)) if interface else None
    except ValueError:
        return None


def listen_host(scheduler: str | None, passthrough: Sequence[str] = ()) -> str | None:
    """Where the workers listen: the host the user's own ``--host``, ``--listen-address`` or
    ``--interface`` names ("" for all interfaces; None where it cannot be read), else the
    interface that reaches the scheduler (given, or in ``--scheduler-file``)."""
    if any(_given(passthrough, option) for option in ADDRESS_OPTIONS):
        return _users_host(passthrough)
    return reaching_host(scheduler or _scheduler_in_file(passthrough))


def binding_args(host: str | None, args: Sequence[str]) -> list[str]:
    """``dask worker`` options that make it, its nanny and its dashboard listen on ``host`` only,
    less those the user's own ``args`` already give (theirs are used unchanged)."""
    if not host:  # all interfaces, as the user asked, or where they did not say
        return []
    if ":" in host and not host.startswith("["):  # an IPv6 address, as a host:port needs it
        host = f"[{host}]"
    binding = []
    if not any(_given(args, option) for option in ADDRESS_OPTIONS):
        binding += ["--host", host]
    if not _given(args, DASHBOARD_ADDRESS):
        binding += [DASHBOARD_ADDRESS, f"{host}:0"]
    return binding


def _uses_tls(scheduler: str | None, passthrough: Sequence[str]) -> bool:
    """Whether the workers listen over TLS: Dask's worker takes the protocol of ``--protocol``,
    ``--listen-address`` or else the scheduler's address, so TLS options alone secure nothing
    against a tcp:// scheduler."""
    said = (
        _value(passthrough, "--protocol")
        or _value(passthrough, "--listen-address")
        or scheduler
        or _scheduler_in_file(passthrough)
        or ""
    )
    return said.startswith("tls")


def _where(host: str | None) -> str:
    if host is None:
        return "the address dask worker chooses"
    if host in ("", "0.0.0.0", "::", "[::]"):
        return f"all interfaces, {host or '0.0.0.0'}"
    return host


def exposure(scheduler: str | None, host: str | None, passthrough: Sequence[str] = ()) -> str:
    """The line ``taskcell worker`` says on start: where its workers listen, and whether over
    TLS, so that what it exposes to the network is never a surprise."""
    target = scheduler or _scheduler_in_file(passthrough)
    if any(_given(passthrough, option) for option in ADDRESS_OPTIONS):
        why = "as your own options after -- say"
    elif target:
        why = f"the interface that reaches {target}"
    else:
        why = "the default route's interface: the scheduler file cannot be read yet"
    if _uses_tls(scheduler, passthrough):
        how = "over TLS"
    elif any(_given(passthrough, option) for option in TLS_OPTIONS):
        how = "plain TCP, without TLS: your TLS options apply only to a tls:// scheduler address"
    else:
        how = (
            "plain TCP, without TLS: whoever reaches it can run code as this user (secure it "
            "with a tls:// scheduler and -- --tls-ca-file CA --tls-cert CERT --tls-key KEY)"
        )
    return f"{PROG}: workers, their nannies and dashboards listen on {_where(host)} ({why}); {how}"


# --- commands -----------------------------------------------------------------------------------


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _merge(detected: dict[str, float], extra: dict[str, float]) -> dict[str, float]:
    merged = dict(detected)
    for key, value in extra.items():
        merged = {k: v for k, v in merged.items() if resource_key(k) != resource_key(key)}
        merged[key] = value
    return merged


def worker_commands(
    scheduler: str | None,
    shares: Sequence[WorkerShare],
    *,
    nthreads: int | None = None,
    scratch: str | None = None,
    name: str | None = None,
    extra_resources: dict[str, float] | None = None,
    passthrough: Sequence[str] = (),
    python: str = sys.executable,
    host: str | None = None,
) -> list[WorkerCommand]:
    """One ``dask worker --nworkers 1`` command per share of the machine.

    Parameters
    ----------
    scheduler
        The scheduler address, or ``None`` when ``passthrough`` names a scheduler file.
    shares
        From :func:`taskcell.cluster.detect.advertised_resources`.
    nthreads
        Threads per process; by default the share's ``CPU``.
    scratch
        ``--local-directory`` for every worker; Dask's default when ``None``.
    name
        The worker name, suffixed ``-0``, ``-1``, ... when there are several shares.
    extra_resources
        Merged over each share's resources; a name replaces a detected one regardless of case.
    passthrough
        Appended to every command unchanged.
    python
        The interpreter that runs ``distributed.cli.dask_worker``.
    host
        Where the workers listen (:func:`listen_host`); by default the interface that reaches
        the scheduler, or the user's own in ``passthrough``. ``--host`` and
        ``--dashboard-address`` are added for it, less those ``passthrough`` gives.
    """
    if host is None:
        host = listen_host(scheduler, passthrough)
    binding = binding_args(host, passthrough)
    commands = []
    for number, share in enumerate(shares):
        resources = _merge(share.resources, extra_resources or {})
        argv = [python, "-m", "distributed.cli.dask_worker"]
        if scheduler:
            argv.append(scheduler)
        argv += [
            "--nworkers",
            "1",
            "--nthreads",
            str(nthreads or int(share.resources[names.CPU])),
            "--memory-limit",
            str(int(share.resources[names.MEMORY])),
            "--resources",
            ",".join(f"{key}={_number(value)}" for key, value in resources.items()),
        ]
        if scratch is not None:
            argv += ["--local-directory", scratch]
        if name is not None:
            argv += ["--name", name if len(shares) == 1 else f"{name}-{number}"]
        argv += [*binding, *passthrough]
        commands.append(WorkerCommand(tuple(argv), share.environ()))
    return commands


# --- running ------------------------------------------------------------------------------------


def _exit_status(returncode: int) -> int:
    # A child killed by signal N reads as -N; shells report 128 + N.
    return 128 - returncode if returncode < 0 else returncode


def _child_setup(parent: int) -> Callable[[], None]:
    libc = None
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
        except OSError:
            libc = None

    def setup() -> None:
        # Runs in the child between fork and exec: undo the launcher's blocking of the
        # forwarded signals, and ask for SIGTERM when the launcher dies.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED_SIGNALS)
        if libc is not None:
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
            if os.getppid() != parent:  # the launcher died before prctl took effect
                os._exit(1)

    return setup


def run_workers(commands: Sequence[WorkerCommand], *, grace: float = STOP_GRACE) -> int:
    """Start the commands, forward SIGINT/SIGTERM to them, and wait until all have exited.

    Returns
    -------
    int
        The first nonzero exit status among the workers (``128 + N`` for one killed by
        signal N), or 0. When a worker fails unasked, the others are sent SIGTERM; workers
        still running ``grace`` seconds after being asked to stop are killed.
    """
    procs: list[subprocess.Popen[bytes]] = []
    received: list[int] = []

    def forward(signum: int, frame: object) -> None:
        received.append(signum)
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signum)

    in_main_thread = threading.current_thread() is threading.main_thread()
    old_handlers = {}
    if in_main_thread:
        old_handlers = {sig: signal.signal(sig, forward) for sig in FORWARDED_SIGNALS}
        # A signal arriving while workers are being started is held until all are running,
        # so that every one of them gets it.
        signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED_SIGNALS)
    try:
        try:
            setup = _child_setup(os.getpid())
            for number, command in enumerate(commands):
                print(f"{PROG}: starting worker {number}: {command.shell()}", file=sys.stderr)
                procs.append(
                    subprocess.Popen(
                        command.argv,
                        env={**os.environ, **command.env},
                        start_new_session=True,
                        preexec_fn=setup,
                    )
                )
        finally:
            if in_main_thread:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED_SIGNALS)
        return _wait(procs, received, grace)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for sig, handler in old_handlers.items():
            signal.signal(sig, handler)


def _wait(procs: Sequence[subprocess.Popen[bytes]], received: list[int], grace: float) -> int:
    failure: int | None = None
    stopping_since: float | None = None
    while True:
        running = False
        for number, proc in enumerate(procs):
            code = proc.poll()
            if code is None:
                running = True
            elif code != 0 and failure is None:
                failure = _exit_status(code)
                if not received:
                    print(
                        f"{PROG}: worker {number} exited with status {failure}; "
                        "stopping the others",
                        file=sys.stderr,
                    )
        if not running:
            return failure or 0
        if stopping_since is None and (received or failure is not None):
            stopping_since = time.monotonic()
            if not received:
                for proc in procs:
                    if proc.poll() is None:
                        proc.terminate()
        if stopping_since is not None and time.monotonic() - stopping_since > grace:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
        time.sleep(0.1)


# --- entry point --------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``taskcell worker`` with ``argv`` (without the program name); return the exit status.

    Bad arguments print an argparse error naming the value and the accepted form and return 2,
    with nothing started.
    """
    ours, passthrough = _split_passthrough(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args, unknown = parser.parse_known_args(ours)
        if unknown:
            parser.error(
                f"unrecognized arguments: {' '.join(unknown)} "
                "(options for dask worker go after --, e.g. `-- --no-nanny`)"
            )
        refused = _refused(passthrough)
        if refused:
            parser.error(
                f"{refused} cannot be passed to dask worker: taskcell worker starts one "
                "process per share of the machine; use taskcell worker --nworkers and "
                "--resources instead"
            )
        if args.scheduler is None and not any(
            arg == "--scheduler-file" or arg.startswith("--scheduler-file=") for arg in passthrough
        ):
            parser.error(
                "expected a scheduler address such as tcp://10.0.0.1:8786 "
                "(or `-- --scheduler-file FILE`), got none"
            )
        if args.scratch is not None and not os.path.isdir(args.scratch):
            parser.error(
                f"argument --scratch: expected an existing directory, got {args.scratch!r}"
            )
    except SystemExit as e:  # argparse's way out, after printing usage or help
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)

    facts = detect_machine(args.scratch)
    host = listen_host(args.scheduler, passthrough)
    try:
        own_limit = memory_limit_option(passthrough, facts.memory_bytes)
    except ValueError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    commands = worker_commands(
        args.scheduler,
        cap_memory(advertised_resources(facts, args.nworkers), own_limit),
        nthreads=args.nthreads,
        scratch=args.scratch,
        name=args.name,
        extra_resources=args.resources,
        passthrough=passthrough,
        host=host,
    )
    print(exposure(args.scheduler, host, passthrough), file=sys.stderr)
    if args.dry_run:
        for command in commands:
            print(command.shell())
        return 0
    return run_workers(commands)


if __name__ == "__main__":
    sys.exit(main())
