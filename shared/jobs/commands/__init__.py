"""What ``accelops jobs render`` and ``accelops jobs submit`` do, one module per command.

Each module imports what its command needs at its top; the parser names them as
``"shared.jobs.commands.<module>:main"`` and imports one only when its command runs.
"""
