"""What ``accelops bq init`` and ``accelops report`` do, one module per command.

Each module imports what its command needs at its top; the parser names them as
``"shared.metrics.commands.<module>:main"`` and imports one only when its command runs.
"""
