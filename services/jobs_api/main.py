"""The gunicorn entry point: ``gunicorn services.jobs_api.main:app``.

Creating the app reads no configuration and opens no connection. Cloud Run ends TLS
in front of the service and says so in ``X-Forwarded-Proto``: the app trusts that
one proxy hop for the scheme, so a request's own URL (the default token audience)
is the ``https://`` URL the caller used.
"""

from __future__ import annotations

from werkzeug.middleware.proxy_fix import ProxyFix

from services.jobs_api.app import create_app
from shared.log import configure

configure()
app = create_app()
app.wsgi_app = ProxyFix(app.wsgi_app, x_for=0, x_proto=1, x_host=0)  # type: ignore[method-assign]
