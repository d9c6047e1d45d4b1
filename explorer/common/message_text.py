"""A message as the window writes it. bertcore's messages start in lower case, since they continue "ValueError: …"
or "cannot start: …" on a command line; a line of the window starts with a capital."""

from __future__ import annotations


def sentence_case(message: str) -> str:
    """`message` with its first letter a capital ("the file is empty" -> "The file is empty"); "" stays ""."""
    return message[:1].upper() + message[1:]
