"""Self-hosted machine translation with LLMs: vLLM ``AsyncLLM`` engines behind Ray Serve.

The package is laid out by layer; each layer imports only from the ones below it:

- ``serving``: the Ray Serve deployment (one replica, one GPU, one engine), its autoscaling
  policy, watchdog and Ray metrics; ``serving.app:build_app`` is what serve configs name.
- ``api``: the HTTP surface: the app factory, native routes, compatibility APIs (``compat``),
  middlewares, and the one mapping from errors to responses.
- ``translation``: from a validated request to a translation: the service (batches,
  admission, deadlines), the flow of a text (detection, cache, splitting, prompts, hygiene)
  and the prompt families (``families``, one registry).
- ``engine``: what the service needs from an engine (``protocol``) and the vLLM implementation.
- ``core``: what every layer shares: the one config, the error taxonomy, the request and
  response models, the metrics interface.
- ``tools``: command-line tools (launcher, KubeRay manifest, capacity plan, tiny model).
- ``client``: the project's own HTTP client (retries with Retry-After).
"""
