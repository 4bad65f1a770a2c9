"""Request-level simulation of a deployment (see `engine`), and its summary."""
