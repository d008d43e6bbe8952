"""The parsed source of a file, once per test session (not a test module).

Several tests read the import statements of ``scg`` and of the example package with :mod:`ast`
(layering, public API, import circles); each file is parsed once and its tree shared. The trees
are read, never changed.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path


@functools.cache
def source_tree(path: Path) -> ast.Module:
    """``path``'s module, parsed (the first call per path reads and parses the file)."""
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
