"""No body, path or query makes the REST API answer with a 5xx (issue 21).

One property test (hypothesis, derandomized) sends every endpoint of ``/taskcell/api/`` and the
dashboard relay random and hostile requests: cluster ids, task keys and paths of any text, any
query, any body (JSON of any shape, or bytes that are not JSON). Each answer must be a 2xx, 3xx
or 4xx; a 4xx from the API carries a JSON message. A body that would start a cluster (``{}``
to ``POST /clusters``) is left out: it is a request done, not a hostile one. Nothing here is
timed.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taskcell.extension.clusters import cluster_id

from .test_hostile import JSON_VALUES, TEXT, encoded, message

#: Nothing listens there: the server knows the cluster and finds it unreachable.
DOWN = "tcp://127.0.0.1:9"

FUZZ = settings(
    max_examples=200,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def sendable(text: str) -> str:
    """``text`` as a URL can carry it: lone surrogates (which no URL encodes) replaced."""
    return text.encode("utf-8", "replace").decode("utf-8")


URL_TEXT = TEXT.map(sendable)
SEGMENT = st.one_of(st.just(cluster_id(DOWN)), URL_TEXT).map(lambda t: t.replace("/", "_") or "_")
BODIES = st.one_of(
    JSON_VALUES.map(encoded),
    st.dictionaries(
        st.sampled_from(["key", "workers", "worker", "kernel", "pool", "size", "path"]), JSON_VALUES
    ).map(encoded),
    st.binary(max_size=200),
)
QUERIES = st.dictionaries(
    st.sampled_from(["since", "timeout", "snapshot", "x"]), URL_TEXT, max_size=3
)


@st.composite
def requests(draw) -> tuple[str, list[str], dict, bytes | None]:
    """A method, the path's parts under the server's base URL, a query and a body."""
    cid, key, tail = draw(SEGMENT), draw(SEGMENT), draw(SEGMENT)
    method, parts = draw(
        st.sampled_from(
            [
                ("GET", ["api", "clusters"]),
                ("POST", ["api", "clusters"]),
                ("GET", ["api", "clusters", cid]),
                ("POST", ["api", "clusters", cid, "cancel"]),
                ("POST", ["api", "clusters", cid, "scale"]),
                ("POST", ["api", "clusters", cid, "stop"]),
                ("POST", ["api", "clusters", cid, "retire"]),
                ("POST", ["api", "clusters", cid, "start-worker"]),
                ("GET", ["api", "clusters", cid, "tasks", key, "output"]),
                ("GET", ["api", "planner"]),
                ("POST", ["api", "planner"]),
                ("POST", ["api", "export"]),
                ("GET", ["dashboard", cid, tail]),
                ("POST", ["dashboard", cid, tail]),
            ]
        )
    )
    body = draw(BODIES) if method == "POST" else None
    if parts == ["api", "clusters"] and method == "POST" and body is not None:
        try:
            starts = json.loads(body) == {}
        except ValueError:
            starts = False
        if starts or not body.strip():
            body = b"[]"
    return method, ["taskcell", *parts], draw(QUERIES), body


class TestEveryEndpoint:
    @pytest.fixture
    def taskcell_config(self) -> dict:
        return {"scheduler_addresses": [DOWN]}

    def test_no_request_gets_a_5xx(self, jp_fetch, jp_asyncio_loop, extension):
        def send(method: str, parts: list[str], query: dict, body: bytes | None):
            return jp_asyncio_loop.run_until_complete(
                jp_fetch(
                    *parts,
                    method=method,
                    body=body,
                    params=query,
                    raise_error=False,
                    follow_redirects=False,
                    allow_nonstandard_methods=True,
                )
            )

        # The cluster is known to be down before hypothesis starts.
        assert send("GET", ["taskcell", "api", "clusters", cluster_id(DOWN)], {}, None).code == 200

        @FUZZ
        @given(request=requests())
        def check(request: tuple[str, list[str], dict, bytes | None]) -> None:
            response = send(*request)
            assert response.code < 500, (request, response.code, response.body[:500])
            if response.code >= 400 and request[1][1] == "api":
                message(response)

        check()
