"""A custom property's name (storage/custom_properties.py): what the Sites API accepts, kept as
sent, and what it refuses with a message naming `property`."""

from __future__ import annotations

import pytest

from storage.custom_properties import InvalidProperty, clean_name


@pytest.mark.parametrize(
    "name", ["author", "logged_in", "a", "x" * 300, "section/ünïcode", " padded ", "emoji 🎉"]
)
def test_a_printable_name_of_1_to_300_characters_is_kept_as_sent(name: str) -> None:
    assert clean_name(name) == name


@pytest.mark.parametrize(
    "name", ["", "   ", "x" * 301, "tab\there", "new\nline", "nul\x00", "del\x7f", "\ud800", None, 7]
)
def test_anything_else_is_refused_naming_property(name: object) -> None:
    with pytest.raises(InvalidProperty) as refused:
        clean_name(name)
    assert str(refused.value).startswith("property: ")
    assert refused.value.field == "property"
