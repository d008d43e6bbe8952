"""An exclusive lock on a directory one process writes (a run directory, a prepared corpus).

``with DirLock(directory, "train"):`` takes an ``fcntl.flock`` on ``directory/.lock`` without
waiting and writes this process's pid and role into it; a second writer fails at once with
:class:`LockedError` naming the holder (``runs/c2f is in use by train (pid 4242)``). The kernel
drops the lock when its holder exits, however it exits (SIGKILL included), so a stale
``.lock`` file never blocks anyone: only a live holder does. A holder that releases the lock
removes the file (a process killed outright leaves it, harmless); a process that locked a file
removed meanwhile tries again on the new one. Keep the :class:`DirLock` object
while the lock is needed: dropping it (garbage collection) releases the lock.

A directory the lock created (with its missing parents) and that is still empty when the lock is
released is removed again: a command that fails before writing anything (a missing input, a bad
option found late) leaves no empty folder behind it.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from types import TracebackType

__all__ = ["LOCK_FILE", "DirLock", "LockedError"]

LOCK_FILE = ".lock"


class LockedError(RuntimeError):
    """Another live process holds the directory's lock."""


class DirLock:
    """An exclusive, non-blocking lock on ``directory`` (created) held by ``role``."""

    def __init__(self, directory: str | Path, role: str) -> None:
        self.directory = Path(directory)
        self.role = role
        self._fd: int | None = None
        #: the directories `acquire` made, innermost first (removed on release if left empty)
        self._created: list[Path] = []

    @property
    def path(self) -> Path:
        return self.directory / LOCK_FILE

    def acquire(self) -> DirLock:
        """Take the lock, or raise :class:`LockedError` naming the holder's pid."""
        if self.directory.exists() and not self.directory.is_dir():
            raise NotADirectoryError(f"{self.directory} is a file, not a directory")
        self._created = [d for d in (self.directory, *self.directory.parents) if not d.exists()]
        self.directory.mkdir(parents=True, exist_ok=True)
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except FileNotFoundError:  # (the holder we waited on removed the directory it had made)
                self.directory.mkdir(parents=True, exist_ok=True)
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "unknown process"
                os.close(fd)
                raise LockedError(
                    f"{self.directory} is in use by {holder}; wait for it to finish, stop it, "
                    f"or choose another directory"
                ) from None
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)  # the holder we waited on removed the file when it released it: lock the new one
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{self.role} (pid {os.getpid()})\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Remove the lock file and drop the lock; then remove the directories `acquire` made
        that are empty (nothing was written into them)."""
        if self._fd is not None:
            try:
                if os.path.samestat(os.fstat(self._fd), os.stat(self.path)):
                    self.path.unlink()
            except FileNotFoundError:
                pass
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
            for made in self._created:
                try:
                    made.rmdir()  # (only an empty directory: anything written into it stays)
                except OSError:
                    break
            self._created = []

    def __del__(self) -> None:  # a holder dropped without release() (an in-process caller)
        self.release()

    def __enter__(self) -> DirLock:
        return self.acquire()

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.release()
