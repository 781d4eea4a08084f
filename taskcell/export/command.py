"""``taskcell export NOTEBOOK [-o FILE] [--target dask|flyte|latch] [--force]``.

Writes the workflow module beside the notebook (``NOTEBOOK.py``) unless ``-o`` says where;
``-o -`` prints it. A file already there is replaced only if taskcell wrote it (its first line
says so) or with ``--force``; the last line says whether a file was replaced. Nothing is written
when the export fails: the error names the cell, and the exit status is 1 (2 for a usage error).
Warnings about cells kept only as comments go to stderr.
"""

from __future__ import annotations

import argparse
import sys
import warnings

from taskcell.export import (
    TARGETS,
    ExportWarning,
    OverwriteError,
    export_notebook,
    write_module,
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="taskcell export",
        description="Export a notebook's %%task cells and data flow to a workflow module.",
    )
    parser.add_argument("notebook", help="the .ipynb file")
    parser.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="where to write the module (default: the notebook's name with .py; - for stdout)",
    )
    parser.add_argument(
        "--target",
        choices=TARGETS,
        default="dask",
        help="dask: run with taskcell on a Dask cluster (default); flyte: a Flyte 2 program; "
        "latch: Latch SDK tasks",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace the output file even if taskcell did not write it (by default only an "
        "earlier export is replaced)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``taskcell export``; return the exit status."""
    parser = _parser()
    try:
        args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    except SystemExit as e:  # argparse printed the usage
        return int(e.code or 0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ExportWarning)
        try:
            if args.output == "-":
                sys.stdout.write(export_notebook(args.notebook, args.target))
                written = None
            else:
                written = write_module(args.notebook, args.output, args.target, force=args.force)
        except OverwriteError as e:
            print(
                f"taskcell export: error: {e.path} exists and was not written by taskcell "
                "export; --force replaces it",
                file=sys.stderr,
            )
            return 1
        # ExportError is a ValueError; others come from reading what the notebook holds.
        except (ValueError, OverflowError, OSError) as e:
            print(f"taskcell export: error: {e}", file=sys.stderr)
            return 1
        finally:
            _report(caught)
    if written is not None:
        replaced = " (replaced the file that was there)" if written.replaced else ""
        print(f"wrote {written.path}{replaced}", file=sys.stderr)
    return 0


def _report(caught: list[warnings.WarningMessage]) -> None:
    """Show the exporter's warnings as the command's own lines, any other warning as usual."""
    for warning in caught:
        if issubclass(warning.category, ExportWarning):
            text = str(warning.message).removeprefix("taskcell: ")
            print(f"taskcell export: warning: {text}", file=sys.stderr)
        else:
            warnings.showwarning(
                warning.message, warning.category, warning.filename, warning.lineno
            )


if __name__ == "__main__":
    sys.exit(main())
