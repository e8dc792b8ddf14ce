"""A Locust load generator for LLM inference servers that reports every request to Pub/Sub.

``locustfile.py`` is the entry point for ``locust -f``. The modules without Locust or
gevent (``settings``, ``records``, ``outbox``, ``protocols``) are importable anywhere,
tests included; importing ``locust`` patches the standard library, so this package
never imports it on its own.
"""

from __future__ import annotations

__all__: list[str] = []
