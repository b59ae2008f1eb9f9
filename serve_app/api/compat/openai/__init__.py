"""The OpenAI API subset translation front ends speak (``/v1/models``,
``/v1/chat/completions`` and ``/v1/responses``, streamed or not): ``protocol.py`` the chat
request and response shapes, ``responses.py`` the Responses API's (a chat completion
underneath), ``serving.py`` a chat completion on the replica's engine, ``router.py`` the
routes and the error shape. What a chat completion means here: docs/compatibility.md."""
