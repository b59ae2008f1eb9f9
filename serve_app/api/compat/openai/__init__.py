"""The OpenAI API subset translation front ends speak (``/v1/models``,
``/v1/chat/completions``, streamed or not): ``protocol.py`` its request and response shapes,
``serving.py`` a chat completion on the replica's engine, ``router.py`` the routes and the
error shape. What a chat completion means here: docs/compatibility.md."""
