"""Python's garbage collector in the serving processes: what its passes cost under load.

``sitecustomize.py`` (put this folder on ``PYTHONPATH``) counts each process's collections
and their time per generation; ``engine_loop.py`` loads vLLM's engine in-process for vLLM's
own ``VLLM_GC_DEBUG=1`` log of the engine core's passes (issue 18's "GC freeze").
"""
