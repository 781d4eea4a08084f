"""Distributed's logging held back where taskcell says what happened in one line itself."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

#: The loggers that write a failed serialisation or a client's lost connection, traceback and all.
_LOGGERS = (
    "distributed",
    "distributed.client",
    "distributed.comm.utils",
    "distributed.core",
    "distributed.protocol.core",
    "distributed.protocol.pickle",
    "distributed.protocol.serialize",
    "distributed.utils",
)


@contextlib.contextmanager
def quiet_distributed() -> Iterator[None]:
    """Silence distributed's loggers inside; their levels are put back after."""
    loggers = [logging.getLogger(name) for name in _LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
