"""A cell's peak memory, measured in the cell process that runs it."""

from __future__ import annotations

import contextlib


class PeakMemory:
    """The peak resident memory of this process while one cell runs.

    ``start()`` before the cell's code, ``stop()`` after it: the bytes the process held at most
    in between. On Linux the high-water mark (``VmHWM``) is reset at ``start()`` through
    ``/proc/self/clear_refs``; elsewhere the process's lifetime peak is the best there is.
    """

    def start(self) -> None:
        with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as f:
            f.write("5")

    def stop(self) -> int:
        with contextlib.suppress(OSError), open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
