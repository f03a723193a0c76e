"""MkDocs hook: links from a docs page to repository files outside ``docs/``.

The pages are also read on GitHub, where ``[deploy/rbac/ui.yaml](../deploy/rbac/ui.yaml)`` is a working link.
MkDocs cannot serve a file outside ``docs_dir``, so on the site such a link becomes the path as inline code
(``deploy/rbac/ui.yaml``). The file must exist in the repository: a link to a missing one is a warning, which
``mkdocs build --strict`` turns into a failure, as it does for a broken link between pages. Links inside
fenced code blocks and inline code are left alone; an image outside ``docs/`` is a warning (nothing to show).
"""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path
from typing import Any

log = logging.getLogger("mkdocs.hooks.repo_links")

# [text](target) or ![alt](target), target without spaces; an optional "title" is not used in these docs
LINK = re.compile(r"(?P<bang>!?)\[(?P<text>[^\]\n]*)\]\((?P<target>[^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _outside_docs(src_uri: str, target: str) -> str | None:
    """The repository path a page's relative link points to, when it leaves docs/ (else None)."""
    if SCHEME.match(target) or target.startswith(("#", "/")):
        return None
    path = target.split("#", 1)[0]
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(src_uri), path))
    if not joined.startswith("../"):
        return None
    return joined[len("../") :]


def _rewrite_line(line: str, src_uri: str, repo: Path) -> str:
    # a link written inside an inline code span is text, not a link
    code_spans = [(c.start(), c.end()) for c in INLINE_CODE.finditer(line)]

    def replace(m: re.Match[str]) -> str:
        if any(start < m.start() < end for start, end in code_spans):
            return m.group(0)
        repo_path = _outside_docs(src_uri, m["target"])
        if repo_path is None:
            return m.group(0)
        if repo_path.startswith("../") or not (repo / repo_path).exists():
            log.warning("Doc file '%s' links to '%s', not a file of the repository", src_uri, m["target"])
            return m.group(0)
        if m["bang"]:
            log.warning("Doc file '%s' shows '%s' from outside docs/: not served", src_uri, m["target"])
            return m.group(0)
        text = m["text"].strip()
        plain = text.strip("`")
        if not text or plain == repo_path or repo_path.endswith("/" + plain):
            return f"`{repo_path}`"
        return f"{text} (`{repo_path}`)"

    return LINK.sub(replace, line)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    repo = Path(config["config_file_path"]).resolve().parent
    out = []
    in_fence = False
    for line in markdown.split("\n"):
        if FENCE.match(line):
            in_fence = not in_fence
            out.append(line)
            continue
        out.append(line if in_fence else _rewrite_line(line, page.file.src_uri, repo))
    return "\n".join(out)
