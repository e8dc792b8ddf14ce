"""The jobs API (Cloud Run, IAM-authenticated): submit, list, status, logs and cancel."""

from __future__ import annotations

from services.jobs_api.app import create_app

__all__ = ["create_app"]
