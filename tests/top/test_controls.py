"""Keys: terminal bytes -> key names, and key names -> the viewer's state."""

from __future__ import annotations

from neuron_monitor.top.controls import ViewState, decode


def test_decode_plain_keys_and_escape_sequences() -> None:
    assert decode(b"q") == ["q"]
    assert decode(b"dcr?f") == ["d", "c", "r", "?", "f"]
    assert decode(b"\x1b[A\x1b[B\x1b[C\x1b[D") == ["up", "down", "right", "left"]
    assert decode(b"\x1bOA\x1b[5~\x1b[6~\x1b[H\x1b[F\x1b[1~\x1b[4~") == [
        "up",
        "pgup",
        "pgdn",
        "home",
        "end",
        "home",
        "end",
    ]
    assert decode(b"\x1b") == ["esc"]
    assert decode(b"\r\n\x7f\x08 \x0c") == ["enter", "enter", "backspace", "backspace", "space", "redraw"]
    assert decode(b"\x1b[99~x") == ["x"]  # an unknown sequence is dropped, the rest kept
    assert decode("é".encode()) == ["é"]


def test_views_help_and_quit() -> None:
    st = ViewState()
    assert st.view == "d"
    assert st.press("c") == "" and st.view == "c"
    st.press("down")
    st.press("pgdn")
    assert st.scroll == 11
    assert st.press("r") == "" and st.view == "r" and st.scroll == 0  # a new view starts at the top
    st.press("up")
    assert st.scroll == 0
    assert st.press("?") == "" and st.help
    assert st.press("x") == "" and not st.help  # any key closes the help
    assert st.press("q") == "quit"


def test_filter_prompt() -> None:
    st = ViewState()
    st.press("f")
    assert st.prompt == ""
    for k in ["j", "o", "b", "-", "0", "x", "backspace", "[", "1", "2", "]"]:
        assert st.press(k) == ""  # q, d, ... are text while typing
    assert st.prompt == "job-0[12]" and st.view == "d"
    st.press("enter")
    assert st.prompt is None and st.filter_text == "job-0[12]"
    assert st.tag_filter is not None and st.tag_filter.search("job-01") and not st.tag_filter.search("job-03")
    st.press("f")
    st.press("q")
    st.press("esc")  # cancelled: the filter stays
    assert st.filter_text == "job-0[12]"
    st.press("f")
    for _ in range(20):
        st.press("backspace")
    st.press("enter")
    assert st.filter_text == "" and st.tag_filter is None


def test_bad_filter_is_refused_with_a_notice() -> None:
    st = ViewState()
    st.press("f")
    st.press("(")
    st.press("enter")
    assert st.filter_text == "" and "invalid regular expression" in st.notice
    st.press("d")
    assert st.notice == ""


def test_replay_keys_are_passed_on() -> None:
    st = ViewState()
    assert st.press("space") == "toggle"
    assert st.press("left") == "back" and st.press("right") == "forward"
    assert st.press("[") == "seek-back" and st.press("]") == "seek-forward"
    assert st.press("home") == "first" and st.press("end") == "last"


def test_s_cycles_the_sort_and_m_opens_the_models_view() -> None:
    from neuron_monitor.top.controls import SORTS

    st = ViewState()
    seen = []
    for _ in range(len(SORTS)):
        assert st.press("s") == ""
        seen.append(st.sort)
    assert seen == ["util", "memory", "tag", "pid", ""]
    st.scroll = 3
    st.press("m")
    assert (st.view, st.scroll) == ("m", 0)


def test_the_devices_view_moves_a_cursor_esc_hides_it_g_toggles_the_graphs() -> None:
    st = ViewState()
    assert st.selected is None
    st.press("j")  # the first move shows the cursor on the first device
    assert st.selected == 0 and st.scroll == 0
    st.press("down")
    st.press("pgdn")
    assert st.selected == 11
    st.press("k")
    st.press("pgup")
    st.press("up")
    assert st.selected == 0  # never above the first device
    st.press("esc")
    assert st.selected is None
    st.press("c")  # other views scroll as before, the cursor stays where it was
    st.press("down")
    assert st.scroll == 1 and st.selected is None
    assert st.graph == "braille"
    st.press("g")
    assert st.graph == "blocks"
    st.press("g")
    assert st.graph == "braille"
    assert st.press("redraw") == "redraw"
