"""Talking to models: addressing, what a model can do, estimates, the shared server, the rate gate and the proxy's words."""
