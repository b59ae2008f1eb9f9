"""deepl-python's own client over the in-process app, for unit tests.

The ``deepl`` library sends its requests through a ``requests.Session`` (synchronous), while
the unit tests' app runs on the test's event loop behind ``httpx.ASGITransport``. This bridge
lets a test drive the real client without a server: the client runs in a worker thread
(``asyncio.to_thread``), and a ``requests`` adapter mounted on its session hands each request
to the test's loop and waits for the app's answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import deepl
import httpx
import requests
from requests.adapters import BaseAdapter
from requests.structures import CaseInsensitiveDict

SERVER_URL = "http://t"
ANSWER_TIMEOUT_S = 30.0


class LoopAdapter(BaseAdapter):
    """A ``requests`` transport that sends through ``http`` on ``loop`` (another thread's)."""

    def __init__(self, http: httpx.AsyncClient, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.http = http
        self.loop = loop

    def send(  # type: ignore[override]
        self, request: requests.PreparedRequest, **kwargs: object
    ) -> requests.Response:
        body = request.body.encode() if isinstance(request.body, str) else request.body
        call = self.http.request(
            request.method or "GET",
            request.url or SERVER_URL,
            headers=dict(request.headers),
            content=body,
        )
        reply = asyncio.run_coroutine_threadsafe(call, self.loop).result(ANSWER_TIMEOUT_S)
        return _response(request, reply.status_code, reply.headers, reply.content)

    def close(self) -> None:
        pass


def _response(
    request: requests.PreparedRequest, status: int, headers: Mapping[str, str], content: bytes
) -> requests.Response:
    response = requests.Response()
    response.status_code = status
    response.headers = CaseInsensitiveDict(headers)
    response._content = content
    response.url = request.url or SERVER_URL
    response.request = request
    return response


def deepl_client(http: httpx.AsyncClient, key: str = "test-key") -> deepl.DeepLClient:
    """A ``DeepLClient`` whose requests reach ``http``'s app; call its methods in a worker
    thread (``await asyncio.to_thread(client.translate_text, ...)``) from a test running on
    the loop it was made on. The client retries 429 and 5xx answers itself
    (``deepl.http_client.max_network_retries``, 5), as against DeepL."""
    client = deepl.DeepLClient(key, server_url=SERVER_URL, send_platform_info=False)
    session: requests.Session = client._client._session  # type: ignore[attr-defined]
    session.mount(SERVER_URL, LoopAdapter(http, asyncio.get_running_loop()))
    return client
