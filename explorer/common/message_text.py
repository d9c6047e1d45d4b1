"""A message as the window writes it. bertcore's messages start in lower case, since they continue "ValueError: …"
or "cannot start: …" on a command line; a line of the window starts with a capital. How long something takes is
written one way everywhere (`format_duration`: a run's time left, an explanation's)."""

from __future__ import annotations


def sentence_case(message: str) -> str:
    """`message` with its first letter a capital ("the file is empty" -> "The file is empty"); "" stays ""."""
    return message[:1].upper() + message[1:]


def format_duration(seconds: float) -> str:
    """"1:02:03" or "2:03"."""
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"
