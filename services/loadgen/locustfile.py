"""Entry point for ``locust -f services/loadgen/locustfile.py``.

Installs the metrics plugin (its options and its Pub/Sub sender) and exposes the two
user classes; ``--server triton|saxml`` keeps the one that speaks the target's protocol.
The plugin is imported first: it prepares gRPC for gevent before anything can open a
channel.
"""

from __future__ import annotations

from locust import events

from services.loadgen.metrics_plugin import install
from services.loadgen.users import SaxmlUser, TritonUser

__all__ = ["SaxmlUser", "TritonUser"]

install(events)
