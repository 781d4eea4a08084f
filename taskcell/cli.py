"""The ``taskcell`` command: ``worker ADDRESS``, ``export NOTEBOOK`` and ``presets``."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``taskcell`` command; returns the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="taskcell", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("worker", help="start Dask workers that advertise this machine", add_help=False)
    sub.add_parser("export", help="export a notebook to a workflow module", add_help=False)
    sub.add_parser("presets", help="print every preset a task can name")
    if argv[:1] == ["worker"]:
        from taskcell.cluster.worker_cli import main as worker

        return worker(argv[1:])
    if argv[:1] == ["export"]:
        from taskcell.export.command import main as export

        return export(argv[1:])
    args = parser.parse_args(argv)
    if args.command == "presets":
        import taskcell

        print(taskcell.presets().to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
