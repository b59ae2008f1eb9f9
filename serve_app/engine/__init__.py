"""The inference engine: the interface the service needs, and its vLLM implementation."""
