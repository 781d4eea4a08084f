"""The dashboard relay keeps Jupyter's XSRF check, which jupyter-server-proxy's handler skips:
a browser signed in by cookie cannot be made to POST through the relay by another site's page.
A real Jupyter server; the request carries no token, as a cookie-signed-in browser's does not."""

from __future__ import annotations


async def test_a_post_without_the_xsrf_token_is_refused_by_that_check(jp_fetch, extension):
    refused = await jp_fetch(
        "taskcell",
        "dashboard",
        "abc",
        "stop",
        method="POST",
        body="",
        headers={"Authorization": ""},  # no token: what a cookie-signed-in browser sends
        raise_error=False,
        follow_redirects=False,
    )
    assert refused.code == 403
    assert b"xsrf" in refused.body.lower()
