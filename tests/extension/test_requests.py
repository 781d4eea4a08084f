"""What a careless or hostile browser sends: no credentials, no XSRF token, bad queries, bodies
that are not JSON, clusters the server does not know. No scheduler is needed for any of it."""

from __future__ import annotations

import json
import urllib.parse

import pytest
from tornado.httpclient import HTTPClientError

from taskcell.extension.clusters import cluster_id

ENDPOINTS = [
    pytest.param("GET", ("clusters",), None, id="GET clusters"),
    pytest.param("GET", ("clusters", cluster_id("tcp://127.0.0.1:1")), None, id="GET cluster"),
    pytest.param("GET", ("planner",), None, id="GET planner"),
    pytest.param("POST", ("planner",), {"size": "1 GiB"}, id="POST planner"),
    pytest.param(
        "POST",
        ("clusters", cluster_id("tcp://127.0.0.1:1"), "cancel"),
        {"key": "a"},
        id="POST cancel",
    ),
]


async def refused(jp_fetch, *parts, **kwargs) -> HTTPClientError:
    with pytest.raises(HTTPClientError) as info:
        await jp_fetch("taskcell", "api", *parts, **kwargs)
    return info.value


def message(error: HTTPClientError) -> str:
    body = json.loads(error.response.body)
    assert set(body) >= {"message", "reason"}, body
    return body["message"]


@pytest.mark.parametrize(("method", "parts", "body"), ENDPOINTS)
async def test_without_credentials_every_endpoint_is_refused(jp_fetch, method, parts, body):
    kwargs = {"method": method, "headers": {"Authorization": ""}}
    if body is not None:
        kwargs["body"] = json.dumps(body)
    error = await refused(jp_fetch, *parts, **kwargs)
    assert error.code == 403


@pytest.mark.parametrize(("method", "parts", "body"), ENDPOINTS)
async def test_a_wrong_token_is_refused(jp_fetch, method, parts, body):
    kwargs = {"method": method, "headers": {"Authorization": "token not-the-token"}}
    if body is not None:
        kwargs["body"] = json.dumps(body)
    error = await refused(jp_fetch, *parts, **kwargs)
    assert error.code == 403


async def login(jp_fetch, token: str) -> dict[str, str]:
    """Log in through Jupyter's login page, as a browser does; returns the cookies."""
    page = await jp_fetch("login", headers={"Authorization": ""})
    cookies = {}
    for header in page.headers.get_list("Set-Cookie"):
        name, _, rest = header.partition("=")
        cookies[name] = rest.split(";")[0]
    form = urllib.parse.urlencode({"password": token, "_xsrf": cookies["_xsrf"]})
    with pytest.raises(HTTPClientError) as redirect:
        await jp_fetch(
            "login",
            method="POST",
            body=form,
            headers={"Authorization": "", "Cookie": f"_xsrf={cookies['_xsrf']}"},
            follow_redirects=False,
        )
    assert redirect.value.code == 302
    for header in redirect.value.response.headers.get_list("Set-Cookie"):
        name, _, rest = header.partition("=")
        cookies[name] = rest.split(";")[0]
    return cookies


async def test_a_cookie_login_reads_but_must_send_the_xsrf_token_to_post(jp_fetch, jp_serverapp):
    cookies = await login(jp_fetch, jp_serverapp.identity_provider.token)
    cookie = "; ".join(f"{k}={v}" for k, v in cookies.items())
    listed = await jp_fetch(
        "taskcell", "api", "clusters", headers={"Authorization": "", "Cookie": cookie}
    )
    assert json.loads(listed.body) == {"clusters": []}

    body = json.dumps({"size": "1 GiB"})
    error = await refused(
        jp_fetch,
        "planner",
        method="POST",
        body=body,
        headers={"Authorization": "", "Cookie": cookie},
    )
    assert error.code == 403
    assert "xsrf" in error.response.body.decode().lower()

    answer = await jp_fetch(
        "taskcell",
        "api",
        "planner",
        method="POST",
        body=body,
        headers={"Authorization": "", "Cookie": cookie, "X-XSRFToken": cookies["_xsrf"]},
    )
    assert answer.code == 200


async def test_no_clusters_without_kernels_or_configuration(api):
    assert await api("clusters") == {"clusters": []}


@pytest.mark.parametrize(
    "cluster",
    [
        cluster_id("tcp://127.0.0.1:1"),
        "not-an-id",
        "x" * 300,
        "%3Cscript%3E",
    ],
    ids=["unknown id", "not an id", "very long", "markup"],
)
async def test_an_unknown_cluster_is_a_404_with_a_json_message(jp_fetch, cluster):
    error = await refused(jp_fetch, "clusters", urllib.parse.unquote(cluster))
    assert error.code == 404
    assert "no cluster with id" in message(error)


class TestLongPollQuery:
    @pytest.fixture
    def taskcell_config(self) -> dict:
        # A configured address nothing listens on: the cluster exists, its scheduler does not.
        return {"scheduler_addresses": ["tcp://127.0.0.1:9"]}

    @pytest.mark.parametrize(
        ("query", "words"),
        [
            ({"since": "abc"}, "since= must be a whole number"),
            ({"since": "1.5"}, "since= must be a whole number"),
            ({"since": "-1"}, "since= must be a non-negative number"),
            ({"timeout": "soon"}, "timeout= must be a number"),
            ({"timeout": "nan"}, "timeout= must be a non-negative number"),
            ({"timeout": "-1"}, "timeout= must be between 0 and 60"),
            ({"timeout": "3600"}, "timeout= must be between 0 and 60"),
        ],
        ids=[
            "since word",
            "since fraction",
            "since negative",
            "timeout word",
            "timeout nan",
            "timeout negative",
            "timeout an hour",
        ],
    )
    async def test_a_bad_query_is_a_400(self, jp_fetch, query, words):
        error = await refused(jp_fetch, "clusters", cluster_id("tcp://127.0.0.1:9"), params=query)
        assert error.code == 400
        assert words in message(error)


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"", "must be a JSON object"),
        (b"{size: 1}", "must be JSON"),
        (b"\xff\xfe", "must be JSON"),
        (b"[1, 2]", "must be a JSON object, got list"),
        (b'"12 GiB"', "must be a JSON object, got str"),
        (b"null", "must be a JSON object, got NoneType"),
        (b"{}", "'size' must be a quantity"),
        (b'{"size": null}', "'size' must be a quantity"),
        (b'{"size": true}', "'size' must be a quantity"),
        (b'{"size": [1]}', "'size' must be a quantity"),
        (b'{"size": ""}', "'size' must be a non-empty string"),
        (b'{"size": -5}', "'size' must be a finite, non-negative number"),
        (b'{"size": 1e999}', "'size' must be a finite, non-negative number"),
        (b'{"size": "1 GiB", "profile": 3}', "'profile' must be a non-empty string"),
        (b'{"size": "1 GiB", "cluster": {}}', "'cluster' must be a non-empty string"),
        (b'{"size": "1 GiB", "extra": 1}', "unknown field(s) 'extra'"),
        (b'{"size": "' + b"9" * 500 + b'"}', "at most 200 characters"),
    ],
    ids=lambda v: v.decode("latin-1")[:30] if isinstance(v, bytes) else None,
)
async def test_a_malformed_planner_body_is_a_400_naming_the_problem(jp_fetch, body, words):
    error = await refused(
        jp_fetch, "planner", method="POST", body=body, allow_nonstandard_methods=True
    )
    assert error.code == 400
    assert words in message(error)


async def test_a_planner_request_for_an_unknown_cluster_is_a_404(jp_fetch):
    body = json.dumps({"size": "1 GiB", "cluster": cluster_id("tcp://10.0.0.1:8786")})
    error = await refused(jp_fetch, "planner", method="POST", body=body)
    assert error.code == 404
