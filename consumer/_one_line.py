r"""Text shown to people, a log message or a line of the CLI's output, kept on its one line.

Such text may quote what a producer wrote (an exception's text, a stored key or response). A line break in it
(``\n``, ``\r``, U+2028, U+2029, NEL) would start a line that a reader, or a log parser, takes for another record (a
forged ``[INFO] ... batch processed``); a control character would reach the terminal (ANSI escapes); a bidirectional
override would show the text in another order than it is. Each becomes its ``\uXXXX`` escape, which keeps JSON
output valid JSON that reads back the same.
"""

from __future__ import annotations

import re

# C0 controls (tab included: Lambda's text log format separates its fields with tabs), DEL, C1 controls (NEL
# included), the line and paragraph separators, and the bidirectional marks, embeddings, overrides and isolates.
_UNSAFE = "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]"


def one_line(text: str) -> str:
    r"""``text`` with each line break, control character and bidirectional control escaped as ``\uXXXX``."""
    return re.sub(_UNSAFE, _escaped, text)  # compiled on first use, then cached by re: nothing at import


def _escaped(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"
