"""Load tests read back: the typed rows of the load-test views, the HTML report with its
PNG charts, and the reader the dashboard and ``accelops report`` share."""
