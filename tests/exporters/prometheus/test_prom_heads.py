"""``server.HeadCache``: the request and response heads a keep-alive scraper repeats, kept per front, against
their plain twins ``parse_head`` and ``response_head`` (hypothesis over heads), and bounded whatever comes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from neuron_monitor.exporters.prometheus.server import (
    HEAD_CACHE_BYTES,
    HEAD_CACHE_ENTRIES,
    HeadCache,
    Request,
    Response,
    parse_head,
    response_head,
)

_TOKEN = st.text(
    st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_."), min_size=1, max_size=12
)
_VALUE = st.text(st.characters(min_codepoint=32, max_codepoint=255, blacklist_characters="\r\n"), max_size=40)
_LINE = st.one_of(
    st.tuples(_TOKEN, _VALUE).map(lambda kv: f"{kv[0]}: {kv[1]}"),
    st.sampled_from(["Content-Length: 0", "Content-Length: 5", "Host: a", "Host: b", "Authorization: Basic eDp5"]),
    _VALUE,  # not a header at all
)
_HEAD = st.tuples(
    st.sampled_from(["GET", "HEAD", "POST", "G T", ""]),
    st.sampled_from(["/metrics", "/", "/metrics?x=1", ""]),
    st.sampled_from(["HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "FTP"]),
    st.lists(_LINE, max_size=6),
).map(lambda h: "\r\n".join([f"{h[0]} {h[1]} {h[2]}", *h[3]]).encode("latin-1"))


def _same(a: Request | Response, b: Request | Response) -> bool:
    if isinstance(a, Request) or isinstance(b, Request):
        return a == b
    return (a.status, a.body, a.headers, a.close) == (b.status, b.body, b.headers, b.close)


@settings(max_examples=300, deadline=None)
@given(st.lists(_HEAD, min_size=1, max_size=8))
def test_a_kept_request_head_parses_as_the_plain_parse_does(heads: list[bytes]) -> None:
    cache = HeadCache("s", {})
    for head in [*heads, *heads]:  # each head twice: parsed, then (when kept) given again
        assert _same(cache.request(head), parse_head(head))


def test_request_heads_with_credentials_or_too_long_are_not_kept_and_the_cache_is_bounded() -> None:
    cache = HeadCache("s", {})
    cache.request(b"GET /metrics HTTP/1.1\r\nAuthorization: Basic eDp5")
    cache.request(b"GET /metrics HTTP/1.1\r\nX-Pad: " + b"x" * HEAD_CACHE_BYTES)
    assert not cache._requests
    for i in range(3 * HEAD_CACHE_ENTRIES):  # heads that never repeat (a hostile client's)
        cache.request(f"GET /metrics?{i} HTTP/1.1".encode())
        assert len(cache._requests) <= HEAD_CACHE_ENTRIES
    head = b"GET /metrics HTTP/1.1\r\nAccept-Encoding: gzip"
    assert cache.request(head) is cache.request(head)  # a scraper's repeated head: the same Request


_HEADERS = st.dictionaries(_TOKEN, _VALUE.filter(lambda v: v == v.strip()), max_size=4)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([200, 304, 401, 404, 431, 500, 503, 599]),
            st.sampled_from(["text/plain; version=0.0.4; charset=utf-8", "application/json", "text/html"]),
            st.integers(min_value=0, max_value=10**12),
            _HEADERS,
            st.booleans(),
            st.booleans(),
        ),
        min_size=1,
        max_size=8,
    ),
    _HEADERS,
)
def test_a_kept_response_head_is_what_the_plain_head_is(
    responses: list[tuple[int, str, int, dict[str, str], bool, bool]], extra: dict[str, str]
) -> None:
    cache = HeadCache("neuron-monitor-prometheus/0.1.0", extra)
    for status, content_type, length, headers, keep_alive, http10 in [*responses, *responses]:
        response = Response(status, b"", content_type, headers)
        expected = response_head(
            status, content_type, length, cache.server_name, {**extra, **headers}, keep_alive, http10
        )
        assert cache.response(response, length, keep_alive, http10) == expected
        assert len(cache._responses) <= HEAD_CACHE_ENTRIES
