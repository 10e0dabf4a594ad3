"""The compiled ledger additions (``counting.add_counts_native``, ``_native.add_counts``) against their plain twin
(``add_counts_plain``): the same totals, in the same order, bit for bit, and the same bad-value counts, whatever
the values (ints, floats, bools, huge, negative, NaN, infinite, not numbers), keys (long, not strings) and
existing totals; and the helper takes the plain batches a daemon writes (it does not just decline)."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from neuron_monitor.exporters.prometheus.counting import CountResult, add_counts_native, add_counts_plain
from neuron_monitor.native import NATIVE

_KEYS = st.one_of(st.sampled_from(["user", "nice", "0", "1", "", "completed"]), st.text(max_size=12))
_VALUES: st.SearchStrategy[Any] = st.one_of(
    st.floats(0.0, 1e13),
    st.integers(0, 2**60),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**70), 2**70),
    st.booleans(),
    st.sampled_from([0, 0.0, -0.0, 1e12, 1e12 + 1, 2**53, 2**53 + 1, 100.01, 1e18]),
)
_TOTALS = st.dictionaries(st.tuples(st.just("fam"), _KEYS), st.floats(0.0, 1e15), max_size=4)


def _bits(totals: dict[tuple[str, ...], float]) -> list[tuple[tuple[str, ...], str]]:
    """Totals with each value as its exact bits (so -0.0 and 0.0, and any last-bit difference, are told apart)."""
    return [(k, v.hex() if isinstance(v, float) else repr(v)) for k, v in totals.items()]


def _run(
    fast: bool,
    totals: dict[tuple[str, ...], float],
    values: dict[Any, Any],
    scale: float,
    most: float,
    keyed: bool,
    limit: int,
) -> tuple[list[tuple[tuple[str, ...], str]], Counter[str]]:
    mine = dict(totals)
    result = CountResult(label_limit=limit)
    (add_counts_native if fast else add_counts_plain)(mine, ("fam",), values, scale, most, keyed, result)
    return _bits(mine), result.bad


@settings(max_examples=600, deadline=None)
@given(
    _TOTALS,
    st.dictionaries(_KEYS, _VALUES, max_size=8),
    st.one_of(st.floats(0.0, 1e6), st.sampled_from([0.0, 1.0, 0.01, 1.92])),
    st.sampled_from([1e12, 1e18, 100.01, 86400.0, 10, 2**60]),
    st.booleans(),
    st.sampled_from([0, 4, 128]),
)
def test_the_native_additions_give_what_the_plain_twin_does(
    totals: dict[tuple[str, ...], float],
    values: dict[Any, Any],
    scale: float,
    most: float,
    keyed: bool,
    limit: int,
) -> None:
    try:
        plain = _run(False, totals, values, scale, most, keyed, limit)
    except TypeError:  # a value the twin cannot compare (a bool is a number to Python; None and str are not)
        return
    assert _run(True, totals, values, scale, most, keyed, limit) == plain


@settings(max_examples=200, deadline=None)
@given(
    _TOTALS,
    st.dictionaries(st.text(max_size=8), st.one_of(st.floats(0.0, 1e12), st.integers(0, 10**12)), max_size=8),
    st.floats(0.0, 100.0),
    st.booleans(),
)
def test_the_native_helper_takes_plain_batches(
    totals: dict[tuple[str, ...], float], values: dict[str, float], scale: float, keyed: bool
) -> None:
    if NATIVE is None:
        return
    mine = dict(totals)
    assert NATIVE.add_counts(mine, ("fam",), values, scale, 1e12, 128, keyed) is True
    assert _bits(mine) == _run(False, totals, values, scale, 1e12, keyed, 128)[0]


def test_the_native_helper_declines_and_leaves_the_totals_untouched() -> None:
    if NATIVE is None:
        return
    for values in (
        {"a": 1.0, "b": -1.0},
        {"a": 1.0, "b": math.nan},
        {"a": 2e12},
        {"a": True},
        {"a": None},
        {"a": 2**54},
    ):
        totals = {("fam", "a"): 5.0}
        assert NATIVE.add_counts(totals, ("fam",), values, 1.0, 1e12, 128, True) is None
        assert totals == {("fam", "a"): 5.0}
    totals = {}
    assert NATIVE.add_counts(totals, ("fam",), {"x" * 9: 1.0}, 1.0, 1e12, 8, True) is None  # a key over the cap
    assert NATIVE.add_counts(totals, ("fam",), {"a": 1.0}, 1, 1e12, 8, True) is None  # an int scale: the twin's
    assert totals == {}


def test_ints_past_2_53_compare_with_the_limit_as_python_compares_them() -> None:
    """An int past 2^53 is not the double it rounds to: Python compares 10^18 + 1 with a limit of 1e18 exactly
    (over it: a bad value), so the helper must leave such ints to the twin and not compare their rounding."""
    for values in ({"a": 10**18 + 1}, {"a": 1.0, "b": 10**18 + 64}, {"a": 2**53 + 1}):
        for keyed in (False, True):
            assert _run(True, {}, values, 1.0, 1e18, keyed, 128) == _run(False, {}, values, 1.0, 1e18, keyed, 128)
