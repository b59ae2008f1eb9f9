"""The web page people try the service with (``/``): static files plus ``GET /ui/config``."""
