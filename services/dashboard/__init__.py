"""The load-test dashboard (Cloud Run): recent tests, one test's report, two tests compared."""

from __future__ import annotations

from services.dashboard.app import create_app

__all__ = ["create_app"]
