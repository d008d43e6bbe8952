"""The test process ends without tearing the interpreter down: after pytest has written its report and
every ``atexit`` callback has run, ``os._exit`` with pytest's exit status.

What it skips is CPython's finalization: the last cyclic collection over the whole heap, then every
module's teardown and the deallocation of everything the run built (torch, dynamo, inductor, Triton,
matplotlib and the tests' own objects). Measured over the default suite with ``resource.getrusage`` at
the last ``atexit`` callback and at the process's end (``/usr/bin/time``): about 6 s of CPU, freeing
memory that the operating system reclaims at once anyway.

Nothing else is skipped, by construction:

- the callback runs after every other ``atexit`` callback: it is registered when this module is
  imported (``tests/conftest.py`` imports it first), and only if the one callback registered before it
  is ``logging.shutdown`` (pytest imports ``logging``), which it takes over and runs itself. So the
  temporary directories' finalizers, multiprocessing's and inductor's worker shutdowns run as usual,
  and a coverage tool started before pytest (whose callback would run after this one) disarms it;
- it acts only when pytest is the program (``pytest`` or ``python -m pytest``), not when a host
  program calls ``pytest.main()`` and goes on, and only once a session has finished (``arm``);
- stdout and stderr are flushed first, as the interpreter would.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
from pathlib import Path

#: pytest's exit status, once its session has finished
_status: list[int] = []


def _program_is_pytest() -> bool:
    program = Path(sys.argv[0]) if sys.argv and sys.argv[0] else Path()
    return program.name in ("pytest", "py.test") or program.parent.name == "pytest"


def _leave() -> None:
    logging.shutdown()  # the callback this one took the place of
    if not _status:
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken stream: the interpreter would skip it too
            pass
    os._exit(_status[-1])


def _take_the_last_place() -> bool:
    """Register ``_leave`` so that it runs after every other ``atexit`` callback, if that is possible:
    pytest imports ``logging``, which registers one callback; any other one means a host or a tool
    registered its own first."""
    if not _program_is_pytest() or atexit._ncallbacks() != 1:  # type: ignore[attr-defined]
        return False
    atexit.unregister(logging.shutdown)
    atexit.register(_leave)
    return True


_ARMED_AT_EXIT = _take_the_last_place()


def arm(status: int) -> None:
    """Record pytest's exit status (``pytest_sessionfinish``): the process ends with it, skipping finalization."""
    if _ARMED_AT_EXIT:
        _status.append(int(status))
