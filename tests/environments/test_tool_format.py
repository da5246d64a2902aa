"""The tool-call text format (environments/tool_format.py) as the environment parses it."""
import pytest

from environments import tool_format as tf


def test_format_and_parse_round_trip_with_unicode_and_surrounding_text():
    args = {"path": "src/λ.py", "content": 'print("<|end|> is just text")\n'}
    text = f"I will write it.\n{tf.format_tool_call('create_file', args)}\ntrailing"
    assert tf.parse_tool_call(text) == ("create_file", args)


@pytest.mark.parametrize("text, message", [
    ("no call", "no tool call found"),
    (f"{tf.TOOL_CALL}{{\"tool\": \"x\"}}", "not terminated"),
    (f"{tf.TOOL_CALL}{{bad{tf.END_TOOL_CALL}", "not valid JSON"),
    (f"{tf.TOOL_CALL}[1]{tf.END_TOOL_CALL}", "must be a JSON object"),
    (f"{tf.TOOL_CALL}{{\"args\": {{}}}}{tf.END_TOOL_CALL}", "non-empty string field \"tool\""),
    (f"{tf.TOOL_CALL}{{\"tool\": \"x\", \"args\": 3}}{tf.END_TOOL_CALL}", "must be an object"),
    (f"{tf.TOOL_CALL}{{\"tool\": \"x\", \"why\": 1}}{tf.END_TOOL_CALL}", "unknown fields"),
])
def test_malformed_calls_name_the_problem(text, message):
    with pytest.raises(tf.ToolCallError, match=message):
        tf.parse_tool_call(text)


def test_parse_summary():
    assert tf.parse_summary(f"{tf.SUMMARY} did X {tf.END_SUMMARY}") == "did X"
    assert tf.parse_summary("plain text") is None
