"""The fenced blocks of a README section marked for tests: ``<!-- first-dag:shell -->`` before a shell block,
``<!-- first-dag:file PATH -->`` before the content of a file the reader saves at PATH."""

from __future__ import annotations

import re
from dataclasses import dataclass

MARKED_BLOCK = re.compile(
    r"<!-- (?P<tag>[a-z0-9-]+):(?P<what>shell|file (?P<path>\S+)) -->\n```[\w-]*\n(?P<body>.*?)```", re.S
)


@dataclass(frozen=True)
class Block:
    kind: str  # "shell" or "file"
    path: str | None  # for a file: where the README says to save it
    body: str


def marked_blocks(text: str, tag: str) -> list[Block]:
    """The blocks marked ``<!-- TAG:... -->``, in the README's order."""
    return [
        Block("file" if m["path"] else "shell", m["path"], m["body"])
        for m in MARKED_BLOCK.finditer(text)
        if m["tag"] == tag
    ]
