"""`Selection`: torchmonarch's selection expressions, parsed and printed as Monarch prints
them (the expected texts were read off torchmonarch 0.7.0)."""

from __future__ import annotations

import pickle

import pytest

import monarch
from monarch._rust_bindings.monarch_hyperactor.selection import Selection

pytestmark = pytest.mark.timeout(30)

R01 = "Range(Range(0, Some(1), 1), True)"


@pytest.mark.parametrize(
    ("text", "printed"),
    [
        ("*", "All(True)"),
        ("?", "Any(True)"),
        ("0", R01),
        ("1:3", "Range(Range(1, Some(3), 1), True)"),
        ("1:", "Range(Range(1, None, 1), True)"),
        (":3", "Range(Range(0, Some(3), 1), True)"),
        ("1:7:2", "Range(Range(1, Some(7), 2), True)"),
        ("::2", "Range(Range(0, None, 2), True)"),
        ("*,*", "All(All(True))"),
        ("( * , 0 )", "All(Range(Range(0, Some(1), 1), True))"),
        ("(*, 1:3) & (0, *)", "Intersection(All(Range(Range(1, Some(3), 1), True)), "
                              "Range(Range(0, Some(1), 1), All(True)))"),
        ("0 | 1 & 2", f"Union({R01}, Intersection(Range(Range(1, Some(2), 1), True), "
                      "Range(Range(2, Some(3), 1), True)))"),
        ("0|1|2", f"Union(Union({R01}, Range(Range(1, Some(2), 1), True)), "
                  "Range(Range(2, Some(3), 1), True))"),
        # A group followed by more dimensions takes them at each of its ends.
        ("(0|1), *", "Union(Range(Range(0, Some(1), 1), All(True)), "
                     "Range(Range(1, Some(2), 1), All(True)))"),
        ("*, (0|1)", f"All(Union({R01}, Range(Range(1, Some(2), 1), True)))"),
    ],
)
def test_parses_and_prints_as_monarch(text: str, printed: str) -> None:
    assert repr(Selection.from_string(text)) == printed


@pytest.mark.parametrize(
    ("text", "why"),
    [("x", "unexpected 'x'"), ("(0", "expected ')' at the end"), ("", "expected a dimension"),
     ("()", "unexpected ')'"), ("-1", "unexpected '-'"), ("1:3:-1", "must be a number")],
)
def test_invalid_text_is_a_value_error_saying_what_and_how(text: str, why: str) -> None:
    with pytest.raises(ValueError, match="Invalid selection") as info:
        Selection.from_string(text)
    assert why in str(info.value) and "'(*, 1:3) & (0, *)'" in str(info.value)


def test_constants_values_and_the_paths() -> None:
    assert repr(Selection.all()) == "All(True)" and repr(Selection.any()) == "Any(True)"
    assert Selection.from_string("(*)") == Selection.all()
    assert pickle.loads(pickle.dumps(Selection.from_string("0, *"))) == Selection.from_string("0,*")
    assert monarch.Selection is Selection
    with pytest.raises(TypeError, match="from_string"):
        Selection()
    with pytest.raises(TypeError, match="takes a str"):
        Selection.from_string(3)  # type: ignore[arg-type]
