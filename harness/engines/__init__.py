"""Engines run images: `docker` through the Docker SDK; `host` (later) in the current environment."""
