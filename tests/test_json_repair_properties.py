"""Properties of argument repair that must hold for any input (hypothesis): it never raises,
valid JSON that fits comes back unchanged, and repairing twice changes nothing more."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from orch_plugins.json_repair import Mended, mend

SCHEMA = {
    "type": "object",
    "properties": {"file_path": {"type": "string"}, "limit": {"type": "integer"},
                   "ratio": {"type": "number"}, "follow": {"type": "boolean"},
                   "tags": {"type": "array", "items": {"type": "string"}},
                   "mode": {"enum": ["text", "bytes"]},
                   "opts": {"type": "object", "properties": {"deep_key": {"type": "integer"}}}},
    "required": ["file_path"],
}
SCHEMAS = st.sampled_from([None, SCHEMA, {"type": "object"}, {"type": "object", "properties": {}}])

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
json_values = st.recursive(
    scalars, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(), kids,
                                                                       max_size=4),
    max_leaves=12)
json_objects = st.dictionaries(st.text(), json_values, max_size=6)
keys = st.sampled_from(["file_path", "filePath", "file-path", "limit", "Limit", "ratio",
                        "follow", "tags", "mode", "opts", "deepKey", "x"])
fitting = st.fixed_dictionaries({"file_path": st.text()}, optional={
    "limit": st.integers(), "ratio": st.floats(allow_nan=False, allow_infinity=False),
    "follow": st.booleans(), "tags": st.lists(st.text(), max_size=3),
    "mode": st.sampled_from(["text", "bytes"]),
    "opts": st.fixed_dictionaries({}, optional={"deep_key": st.integers()})})
near_miss = st.dictionaries(keys, st.one_of(
    st.integers(), st.text(max_size=8), st.sampled_from(["5", "true", "TEXT", "[\"a\"]", "2.5"]),
    st.dictionaries(keys, st.integers() | st.text(max_size=4), max_size=2)), max_size=5)

# Ways models break JSON, applied to a valid text.
BREAKERS = [
    lambda t: t.replace('"', "'"),
    lambda t: t.replace('"', "“", 1).replace('"', "”", 1),
    lambda t: t[:-1],
    lambda t: t[:-1] + ",}",
    lambda t: t + "}",
    lambda t: "/* note */ " + t,
    lambda t: t.replace(",", ", // more\n", 1),
    lambda t: json.dumps(t),
    lambda t: t[: len(t) // 2],
]
broken = st.builds(lambda obj, i: BREAKERS[i](json.dumps(obj, ensure_ascii=False)),
                   json_objects | near_miss, st.integers(0, len(BREAKERS) - 1))
anything = st.text() | broken | st.binary().map(lambda b: b.decode("latin-1"))

SETTINGS = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(anything, SCHEMAS)
def test_repair_never_raises(raw, schema):
    mended = mend(raw, schema)
    assert isinstance(mended.text, str)
    if mended.error is None:
        assert isinstance(json.loads(mended.text or "{}"), dict)  # what runs is an object


@SETTINGS
@given(json_objects, st.sampled_from([None, {"type": "object"}]), st.booleans())
def test_valid_json_comes_back_unchanged(obj, schema, pretty):
    raw = json.dumps(obj, indent=2 if pretty else None)
    assert mend(raw, schema) == Mended(raw)  # no fixes, no error


@SETTINGS
@given(fitting, st.booleans())
def test_valid_json_that_fits_the_schema_comes_back_unchanged(obj, ascii_only):
    raw = json.dumps(obj, ensure_ascii=ascii_only)
    mended = mend(raw, SCHEMA)
    assert mended.text == raw and mended.fixes == () and mended.error is None


@SETTINGS
@given(anything | near_miss.map(json.dumps), SCHEMAS)
def test_repair_is_idempotent(raw, schema):
    once = mend(raw, schema)
    twice = mend(once.text, schema)
    assert twice.text == once.text
    assert twice.fixes == ()  # nothing was left half-mended
    assert twice.error == once.error
