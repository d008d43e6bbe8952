"""The cyclic garbage collector's schedule for a test run: what the run builds once (torch, scg, the test
modules) is never collected, and what the tests build is collected rarely.

Importing this module (``tests/conftest.py`` does, before it imports torch) turns the collector off: while
torch, scg and the test modules are imported, everything they build lives to the end of the run, so its
passes find nothing (~430 passes while torch and scg are imported, ~0.3 s of CPU; eleven full passes, ~2.5 s,
while the test modules are collected). `after_collection` freezes that heap (full passes then skip it) and
turns the collector back on with a young generation of 50,000 net allocations instead of 700 and a full pass
only after 100 middle ones: the tests' objects are then walked a few times, not dozens. Measured with
``gc.callbacks`` over the default suite: 7.7 s of CPU in the collector (27 full passes) with Python's
defaults; 2.5 s (5 full passes) with (10_000, 10, 10) and the heap frozen; 1.8-1.9 s (1) with these. Peak
memory 0.75-0.76 GB in each case.
"""

from __future__ import annotations

import atexit
import gc

gc.disable()

#: the collector's thresholds while the tests run: (young, middle, full)
THRESHOLDS = (50_000, 20, 100)


def after_collection() -> None:
    """Freeze what importing and collecting built, then collect again on `THRESHOLDS`."""
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    gc.enable()


def at_session_finish() -> None:
    """Unfreeze when the interpreter exits (an ``atexit`` callback runs before its last collection), so
    that the last collection frees what collection built: frozen objects are never freed, and Triton's
    bindings then report them as leaked at exit. Not at session finish itself: pytest's own two full
    collections after the session (its unraisable-exception check) would then walk the whole heap again
    (1.1 + 0.8 s of CPU unfrozen, 0.4 + 0.3 s frozen, over the default suite). Where the process ends by
    ``_fast_exit`` (the usual case), that last collection does not run at all."""
    atexit.register(gc.unfreeze)
