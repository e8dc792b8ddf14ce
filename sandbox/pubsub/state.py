"""Optional persistence of topics and subscriptions to a JSON state file.

Only configuration is persisted (messages are not): restarting the sandbox
keeps the resources a developer created by hand or with Terraform-like setup
scripts, which is what makes a restart cheap. Writes are atomic (temp file +
rename) and happen after every configuration change.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
from pathlib import Path

from sandbox.pubsub.broker import Broker

_LOG = logging.getLogger(__name__)


class StateFile:
    """Loads a broker's configuration from a file and saves it on every change."""

    def __init__(self, path: str | os.PathLike[str], broker: Broker) -> None:
        self.path = Path(path)
        self._broker = broker
        self._lock = threading.Lock()

    def load(self) -> None:
        """Recreate the saved topics and subscriptions (a missing file is an empty state)."""
        if not self.path.exists():
            return
        data = json.loads(self.path.read_text(encoding="utf-8") or "{}")
        self._broker.import_config(data)

    def attach(self) -> None:
        """Save now and after every subsequent configuration change."""
        self._broker.add_config_listener(self.save)
        self.save()

    def save(self) -> None:
        """Atomically write the current configuration."""
        with self._lock:
            data = self._broker.export_config()
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".pubsub-state-", dir=self.path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    json.dump(data, handle, indent=2, sort_keys=True)
                os.replace(tmp, self.path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
            _LOG.debug("saved Pub/Sub state to %s", self.path)
