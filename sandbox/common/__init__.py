"""What the stand-ins share: the simulated clock (and its remote control), the HTTP
server of the REST stand-ins, state files, loopback ports, waiting for a part to come
up, and the last lines of a log file."""
