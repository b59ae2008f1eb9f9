"""The HTTP API: FastAPI routes (native and compatible), middlewares and error responses."""
