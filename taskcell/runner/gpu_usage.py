"""Peak GPU memory of a cell process, through NVML where there is one."""

from __future__ import annotations

import os
import threading
from typing import Any


class GpuPeak:
    """Peak GPU memory this process holds while a cell runs, sampled through NVML every 20 ms.

    ``stop()`` returns None where there is no NVML (no ``nvidia-ml-py``, no driver, no GPU).
    NVML reports processes by their host PID; in a container with its own PID namespace the
    process is not found and the figure is 0.
    """

    def __init__(self) -> None:
        self._nvml: Any = None
        self._handles: list = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.peak = 0
        try:
            import pynvml

            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
        except Exception:  # no NVML library, no driver, or no GPU
            return
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        wanted = None if visible is None else {v.strip() for v in visible.split(",")}
        for i in range(count):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            uuid = pynvml.nvmlDeviceGetUUID(handle)
            uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
            if wanted is None or str(i) in wanted or uuid in wanted:
                self._handles.append(handle)
        self._nvml = pynvml

    def _used(self) -> int:
        pid, total = os.getpid(), 0
        for handle in self._handles:
            try:
                processes = self._nvml.nvmlDeviceGetComputeRunningProcesses(handle)
            except Exception:
                continue
            total += sum(p.usedGpuMemory or 0 for p in processes if p.pid == pid)
        return total

    def start(self) -> None:
        if self._nvml is None or not self._handles:
            return
        self.peak = self._used()
        self._stop.clear()
        self._thread = threading.Thread(target=self._sample, name="gpu-peak", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self._used())

    def stop(self) -> int | None:
        if self._thread is None:
            return None
        self._stop.set()
        self._thread.join()
        self._thread = None
        return max(self.peak, self._used())


_gpu: GpuPeak | None = None


def gpu_peak() -> GpuPeak:
    """The process's one sampler (NVML is initialised once)."""
    global _gpu
    if _gpu is None:
        _gpu = GpuPeak()
    return _gpu
