"""``accelops sandbox``: starting, watching and stopping the sandbox's processes (the
stand-ins, the functions and the services), the endpoints they serve, who may use the
Kubernetes API, and creating what the functions expect to find."""
