from pathlib import Path

import pytest

from vmplane.envspec.jsonc import MAX_DEPTH, JsoncSyntaxError, parse_jsonc

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fixed.jsonc"


def test_plain_json_values():
    value, _ = parse_jsonc('{"s": "x", "i": -12, "f": 1.5e2, "z": 0, "t": true, "n": null, "a": [false]}')
    assert value == {"s": "x", "i": -12, "f": 150.0, "z": 0, "t": True, "n": None, "a": [False]}
    assert type(value["i"]) is int
    assert type(value["f"]) is float


def test_comments_and_trailing_commas():
    text = """\
// leading comment
{
  /* block
     comment */ "a": [1, 2, /* inline */ 3,], // trailing
  "b": { "c": "// not a comment", "d": "/* nor this */", },
}
/* after */
"""
    value, _ = parse_jsonc(text)
    assert value == {"a": [1, 2, 3], "b": {"c": "// not a comment", "d": "/* nor this */"}}


def test_string_escapes():
    value, _ = parse_jsonc(r'["a\"b", "\\ \/ \b \f \n \r \t", "\u00e9", "\ud83d\ude00"]')
    assert value == ['a"b', "\\ / \b \f \n \r \t", "é", "😀"]


def test_empty_containers():
    value, positions = parse_jsonc('{ "a": {}, "b": [] }')
    assert value == {"a": {}, "b": []}
    assert positions.values[("a",)] == (1, 8)
    assert positions.values[("b",)] == (1, 17)


def test_value_and_key_positions():
    text = """\
{
  "name": "demo",
  "pools": {
    "web": { "size": 2 },
  },
  "ports": [
    80,
      443,
  ],
}"""
    _, positions = parse_jsonc(text)
    assert positions.values[()] == (1, 1)
    assert positions.keys[("name",)] == (2, 3)
    assert positions.values[("name",)] == (2, 11)
    assert positions.values[("pools",)] == (3, 12)
    assert positions.keys[("pools", "web")] == (4, 5)
    assert positions.values[("pools", "web")] == (4, 12)
    assert positions.keys[("pools", "web", "size")] == (4, 14)
    assert positions.values[("pools", "web", "size")] == (4, 22)
    assert positions.values[("ports", 0)] == (7, 5)
    assert positions.values[("ports", 1)] == (8, 7)
    assert ("ports", 0) not in positions.keys


def test_positions_after_comments_and_crlf():
    text = '/* one\r\ntwo */ {\r\n  // c\r\n  "a": 1 }'
    _, positions = parse_jsonc(text)
    assert positions.values[()] == (2, 8)
    assert positions.keys[("a",)] == (4, 3)
    assert positions.values[("a",)] == (4, 8)


def test_example_file_parses():
    value, positions = parse_jsonc(EXAMPLE.read_text())
    assert value["pools"]["web"]["size"] == 2
    assert value["$schema"] == "./vmplane.env.schema.json"
    assert positions.values[("pools", "web", "image")] == (19, 16)


@pytest.mark.parametrize(
    ("text", "message", "line", "col"),
    [
        ('{"a": 1', "expected ',' or '}' after object member", 1, 8),
        ('{"a": 1 "b": 2}', "expected ',' or '}' after object member", 1, 9),
        ("[1 2]", "expected ',' or ']' after array element", 1, 4),
        ('{"a" 1}', "expected ':' after object key", 1, 6),
        ('{\n  "a": "abc\n}', "unterminated string", 2, 8),
        ('"abc', "unterminated string", 1, 1),
        ("{} /* never closed", "unterminated block comment", 1, 4),
        ('"\\q"', "invalid escape sequence '\\q'", 1, 2),
        ('"\\u12x4"', "invalid \\u escape: expected 4 hex digits", 1, 2),
        ('"a\tb"', "control character '\\t' in string must be escaped", 1, 3),
        ("01", "invalid number '01'", 1, 1),
        ("[1.2.3]", "invalid number '1.2.3'", 1, 2),
        ("-", "invalid number '-'", 1, 1),
        ("1e999", "number '1e999' is out of range", 1, 1),
        ("{'a': 1}", "strings must use double quotes", 1, 2),
        ("{a: 1}", "object keys must be double-quoted strings", 1, 2),
        ("{,}", "expected an object key or '}', found ','", 1, 2),
        ("[1,,2]", "expected a value before ','", 1, 4),
        ('{"a": }', "expected a value, found '}'", 1, 7),
        ("[tru]", "unexpected 'tru': expected a value (strings must be double-quoted)", 1, 2),
        ("NaN", "unexpected 'NaN': expected a value", 1, 1),
        ("", "empty document: expected a JSON value", 1, 1),
        ("// nothing but a comment\n", "empty document: expected a JSON value", 2, 1),
        ("{} {}", "unexpected '{' after the top-level value", 1, 4),
        ("[", "unexpected end of input: expected a value", 1, 2),
    ],
)
def test_syntax_errors(text, message, line, col):
    with pytest.raises(JsoncSyntaxError) as exc:
        parse_jsonc(text)
    assert (exc.value.message, exc.value.line, exc.value.col) == (message, line, col)
    assert str(exc.value) == f"{line}:{col}: {message}"


def test_duplicate_key_points_at_second_key_with_path():
    text = '{\n  "pools": {\n    "web": {"size": 1,\n      "size": 2}\n  }\n}'
    with pytest.raises(JsoncSyntaxError) as exc:
        parse_jsonc(text)
    assert exc.value.message == "duplicate key 'size'"
    assert (exc.value.line, exc.value.col) == (4, 7)
    assert exc.value.path == ("pools", "web", "size")


def test_same_key_in_different_objects_is_fine():
    value, _ = parse_jsonc('{"a": {"x": 1}, "b": {"x": 2}}')
    assert value == {"a": {"x": 1}, "b": {"x": 2}}


def test_reasonable_depth_parses_and_excessive_depth_is_a_syntax_error():
    deep = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    value, _ = parse_jsonc(deep)
    for _ in range(MAX_DEPTH - 1):
        value = value[0]
    assert value == []
    with pytest.raises(JsoncSyntaxError, match="nesting deeper than"):
        parse_jsonc("[" * 5000 + "]" * 5000)
