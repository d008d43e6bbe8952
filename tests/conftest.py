"""Shared test configuration: a headless matplotlib backend and the shared data folder."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("SCG_SHARED_DATA", REPO.parent / "shared" / "data"))
