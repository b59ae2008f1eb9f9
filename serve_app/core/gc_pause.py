"""Python's cyclic garbage collector paused while a worker thread reads a large input.

Why it exists: a reader that builds a million small objects (markdown-it's tokens for a
Markdown table of 400,000 cells, 1.6 MB) sets off the collector's full passes again and again
while it allocates, and each pass walks every object of the process holding the GIL: the
replica's event loop stood still for up to 1.4 s at a time, and the read took twice as long
(17 s against 8.7 s with the collector off). The objects of a parse are freed by reference
counting when it ends; the collector has nothing to find in them.

The collector is one per process, so the pause is shared: the first large read stops it,
the last one to end starts it again, and a collector that something else had turned off is
left off. Only inputs of ``GC_PAUSE_CHARS`` or more pause it, so that requests of ordinary
size, which are read all the time under load, never keep it off: garbage with cycles made
elsewhere meanwhile waits for the end of the large reads (seconds), not longer.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

GC_PAUSE_CHARS = 100_000

_lock = threading.Lock()
_holders = 0
_paused_by_us = False


@contextmanager
def gc_paused(size: int) -> Iterator[None]:
    """The collector off through the block when ``size`` (characters read) is at least
    ``GC_PAUSE_CHARS``; as it was otherwise."""
    global _holders, _paused_by_us
    if size < GC_PAUSE_CHARS:
        yield
        return
    with _lock:
        if _holders == 0:
            _paused_by_us = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _paused_by_us:
                gc.enable()
