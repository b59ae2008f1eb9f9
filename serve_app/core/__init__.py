"""What every layer shares: the configuration, the error taxonomy, the API's request and
response models and the metrics interface. Nothing here imports Ray, vLLM or FastAPI routes."""
