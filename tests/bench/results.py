"""Where benchmark figures go: ``bench-results/<name>.json`` (git-ignored)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench-results"


def write_results(name: str, figures: Any) -> Path:
    """Write the figures as JSON, say where, and return the file."""
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"{name}.json"
    out.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"\nwritten to {out.relative_to(REPO)}")
    return out
