"""Command-line tools run beside the service (``python -m serve_app.tools.NAME``)."""
