"""What the ``accelops`` commands of ``shared/cli.py`` do, one module per command.

Each module imports what its command needs at its top; ``shared/cli.py`` names them as
``"shared.commands.<module>:main"`` and imports one only when its command runs, so
``accelops --help`` imports none of them and ``accelops catalogue`` no client.
"""
