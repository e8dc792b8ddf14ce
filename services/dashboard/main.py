"""The gunicorn entry point: ``gunicorn services.dashboard.main:app``.

Creating the app reads no configuration and opens no connection; the BigQuery
source is created on the first request that needs it.
"""

from __future__ import annotations

from services.dashboard.app import create_app
from shared.log import configure

configure()
app = create_app()
