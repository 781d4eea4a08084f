"""Every endpoint against what a careless or hostile browser sends: a 4xx with a JSON message
naming the bad value, never a 5xx, and never a request that holds the server's event loop (the
server answers the next request; a hang fails the suite's timeout).

The concrete findings of issue 10 first, then property-based tests (hypothesis, derandomized)
that drive ``POST /taskcell/api/planner``, ``POST /taskcell/api/export`` and the cancel endpoint
with random and hostile bodies; ``test_fuzz.py`` drives every endpoint. Nothing is timed.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nbformat.v4 import new_code_cell, new_notebook
from tornado.httpclient import HTTPResponse

from taskcell.extension.clusters import cluster_id
from taskcell.extension.handlers import MAX_BODY


async def post(jp_fetch, endpoint: str, body: bytes | str) -> HTTPResponse:
    """POST ``body`` as is; the response, whatever its status."""
    return await jp_fetch(
        "taskcell",
        "api",
        endpoint,
        method="POST",
        body=body,
        raise_error=False,
        allow_nonstandard_methods=True,
    )


def message(response: HTTPResponse) -> str:
    """The message of a JSON error reply; fails on any other reply."""
    reply = json.loads(response.body)
    assert set(reply) >= {"message", "reason"}, reply
    assert isinstance(reply["message"], str) and reply["message"], reply
    return reply["message"]


# -- the findings of issue 10 ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ('{"size": "1e99999999"}', "got '1e99999999'"),
        ('{"size": "1e308"}', "got '1e308'"),
        ('{"size": "1e400"}', "got '1e400'"),
        ('{"size": "1e-99999999"}', "got '1e-99999999'"),
        ('{"size": "1e999999999999999999"}', "got '1e999999999999999999'"),
        ('{"size": "²"}', "got '²'"),
        ('{"size": "１２ GiB"}', "got '１２ GiB'"),
        ('{"size": ' + str(10**400) + "}", "must be at most 4611686018427387904 bytes"),
        ('{"size": 1e308}', "got 1e+308"),
        ('{"size": 5e18}', "got 5e+18"),
        ('{"size": ' + "9" * 5000 + "}", "must be JSON"),
        ('{"size": 1e99999999}', "finite, non-negative number of bytes, got inf"),
        ('{"size": NaN}', "finite, non-negative number of bytes, got nan"),
        ('{"size": "1 GiB", "profile": "' + "x" * 300 + '"}', "at most 200 characters"),
    ],
    ids=[
        "exponent of eight digits",
        "1e308 text",
        "1e400 text",
        "tiny exponent",
        "exponent of eighteen digits",
        "superscript two",
        "full-width digits",
        "10**400 as a JSON number",
        "1e308 as a JSON number",
        "just over 4 EiB",
        "5000 digits",
        "JSON number overflowing to inf",
        "NaN",
        "long profile",
    ],
)
async def test_a_planner_size_out_of_bounds_is_a_400_naming_it(jp_fetch, body, words):
    response = await post(jp_fetch, "planner", body)
    assert response.code == 400, response.body
    assert words in message(response)


async def test_a_huge_planner_size_leaves_the_server_answering(jp_fetch, api):
    response = await post(jp_fetch, "planner", '{"size": "1e99999999"}')
    assert response.code == 400
    assert (await api("planner", method="POST", body='{"size": "1 GiB"}'))["size"] == 2**30


@pytest.mark.parametrize("endpoint", ["planner", "export"])
@pytest.mark.parametrize(
    ("body", "code", "words"),
    [
        (b"[" * 50_000 + b"]" * 10_000, 400, "nested less deeply"),
        (b'{"size": "' + b"1" * MAX_BODY + b'"}', 413, f"at most {MAX_BODY} bytes"),
        (b'{"path": "\xed\xa0\x80.ipynb"}', 400, "must be JSON"),
    ],
    ids=["nested 50000 deep", "over 64 KiB", "surrogate bytes"],
)
async def test_a_body_no_browser_sends_is_refused_before_it_is_read(
    jp_fetch, endpoint, body, code, words
):
    response = await post(jp_fetch, endpoint, body)
    assert response.code == code
    assert words in message(response)


class TestQuery:
    @pytest.fixture
    def taskcell_config(self) -> dict:
        return {"scheduler_addresses": ["tcp://127.0.0.1:9"]}

    @pytest.mark.parametrize(
        ("query", "words"),
        [
            ({"since": "٣"}, "since= must be written in ASCII digits, got '٣'"),
            ({"timeout": "３"}, "timeout= must be written in ASCII digits, got '３'"),
            ({"since": "9" * 5000}, "since= must be a whole number"),
            ({"timeout": "1e999"}, "timeout= must be between 0 and 60"),
        ],
        ids=["arabic-indic digit", "full-width digit", "5000 digits", "infinite timeout"],
    )
    async def test_a_hostile_query_is_a_400(self, jp_fetch, query, words):
        response = await jp_fetch(
            "taskcell",
            "api",
            "clusters",
            cluster_id("tcp://127.0.0.1:9"),
            params=query,
            raise_error=False,
        )
        assert response.code == 400
        assert words in message(response)


# -- property-based: random and hostile bodies -----------------------------------------------

HOSTILE_TEXT = [
    "1e99999999",
    "1e-99999999",
    "9e999999999999999999999",
    "0." + "0" * 150 + "1",
    "9" * 199,
    "1" * 5000,
    "²",
    "１２ GiB",
    "٣Gi",
    "NaN",
    "-inf",
    "0x10",
    "1_000",
    "\x00",
    "\ud800",
    "\udcff.ipynb",
    "../../etc/passwd",
    "/etc/*",
    "~/.ssh/*",
    "<script>alert(1)</script>",
    "%s%s%s%n",
    "1e308",
    "12 GiB",
    "500m",
    " ",
]

NUMBERS = st.one_of(
    st.integers(min_value=-(10**500), max_value=10**500),
    st.floats(),
    st.integers(min_value=0, max_value=4000).map(lambda e: 10**e),
)

QUANTITIES = st.from_regex(
    r"\A[+-]?[0-9]{1,8}(\.[0-9]{0,6})?([eE][+-]?[0-9]{1,12})? ?"
    r"(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|B|GiB|GB|gb|m|b|Gb)?\Z"
)

TEXT = st.one_of(st.sampled_from(HOSTILE_TEXT), st.text(max_size=40), QUANTITIES)

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | NUMBERS | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)


def encoded(value: object) -> bytes:
    """JSON as Python writes it (NaN and Infinity included), lone surrogates escaped."""
    return json.dumps(value).encode()


PLANNER_BODIES = st.one_of(
    st.fixed_dictionaries(
        {"size": st.one_of(QUANTITIES, TEXT, NUMBERS, JSON_VALUES)},
        optional={
            "profile": st.one_of(st.sampled_from(["default", "light", "gpu-training"]), TEXT),
            "cluster": st.one_of(TEXT, JSON_VALUES),
        },
    ).map(encoded),
    JSON_VALUES.map(encoded),
    st.binary(max_size=200),
)

#: Probabilistic tests kept short and repeatable on a loaded two-core machine.
PROPERTY = settings(
    max_examples=120,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def test_the_planner_answers_any_body_with_an_answer_or_a_4xx(jp_fetch, jp_asyncio_loop, extension):
    def send(body: bytes) -> HTTPResponse:
        return jp_asyncio_loop.run_until_complete(post(jp_fetch, "planner", body))

    assert send(b'{"size": "1 GiB"}').code == 200

    @PROPERTY
    @given(body=PLANNER_BODIES)
    def check(body: bytes) -> None:
        response = send(body)
        assert response.code < 500, (body, response.code, response.body)
        if response.code == 200:
            assert "preset" in json.loads(response.body)
        else:
            assert 400 <= response.code < 500
            message(response)

    check()


def notebook_file(path: Path, *cells: str) -> None:
    nbformat.write(new_notebook(cells=[new_code_cell(c) for c in cells]), path)


HAND_WRITTEN = b"# my own module\nx = 1\n"


def test_the_export_answers_any_body_without_a_5xx_or_a_lost_file(
    jp_fetch, jp_asyncio_loop, extension, jp_root_dir
):
    notebook_file(jp_root_dir / "nb.ipynb", "x = 1", "%%task\ny = x")
    notebook_file(jp_root_dir / "bad.ipynb", "x = 1", "%%task --gpu ²\ny = x")
    (jp_root_dir / "dir.py").mkdir()
    notebook_file(jp_root_dir / "dir.ipynb", "x = 1")
    module = jp_root_dir / "nb.py"
    paths = ["nb.ipynb", "bad.ipynb", "dir.ipynb", "nope.ipynb", "nb.py", "a" * 300 + ".ipynb"]
    bodies = st.one_of(
        st.fixed_dictionaries(
            {"path": st.one_of(st.sampled_from(paths), TEXT, JSON_VALUES)},
            optional={
                "target": st.one_of(st.sampled_from(["dask", "flyte", "latch"]), JSON_VALUES),
                "overwrite": st.one_of(st.booleans(), JSON_VALUES),
            },
        ).map(encoded),
        JSON_VALUES.map(encoded),
        st.binary(max_size=100),
    )

    @settings(PROPERTY, max_examples=60)
    @given(body=bodies)
    def check(body: bytes) -> None:
        module.write_bytes(HAND_WRITTEN)
        response = jp_asyncio_loop.run_until_complete(post(jp_fetch, "export", body))
        assert response.code < 500, (body, response.code, response.body)
        if response.code == 200:
            assert json.loads(body)["overwrite"] is True
            assert json.loads(response.body)["replaced"] is True
        else:
            assert 400 <= response.code < 500
            message(response)
            assert module.read_bytes() == HAND_WRITTEN, body
        assert not (jp_root_dir / "dir.py").is_file()

    check()


class TestCancel:
    @pytest.fixture
    def taskcell_config(self) -> dict:
        return {"scheduler_addresses": ["tcp://127.0.0.1:9"]}  # nothing listens there

    def test_any_body_is_a_4xx(self, jp_fetch, jp_asyncio_loop, extension):
        endpoint = f"clusters/{cluster_id('tcp://127.0.0.1:9')}/cancel"

        def send(body: bytes) -> HTTPResponse:
            return jp_asyncio_loop.run_until_complete(post(jp_fetch, endpoint, body))

        assert send(b'{"key": "a"}').code == 409  # the link is known down before hypothesis

        bodies = st.one_of(
            st.fixed_dictionaries(
                {"key": st.one_of(TEXT, JSON_VALUES)}, optional={"force": JSON_VALUES}
            ).map(encoded),
            JSON_VALUES.map(encoded),
            st.binary(max_size=100),
        )

        @settings(PROPERTY, max_examples=60)
        @given(body=bodies)
        def check(body: bytes) -> None:
            response = send(body)
            assert response.code in (400, 409), (body, response.code, response.body)
            message(response)

        check()
