"""The size every accelops chart is drawn at (load tests, job usage, savings): one size
and resolution, so the report and the dashboard lay them out alike."""

from __future__ import annotations

__all__ = ["DPI", "HEIGHT_IN", "HEIGHT_PX", "WIDTH_IN", "WIDTH_PX"]

WIDTH_IN, HEIGHT_IN, DPI = 9.0, 4.2, 100
WIDTH_PX, HEIGHT_PX = round(WIDTH_IN * DPI), round(HEIGHT_IN * DPI)
