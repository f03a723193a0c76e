#!/usr/bin/env bash
# Build the docs site (mkdocs.yml) with warnings as errors: a broken link, an unknown anchor, a page left out of
# the nav or a docstring mkdocstrings cannot read fails the build.
#
# The tools (pinned in docs/requirements.txt) live in a venv of their own, outside the repository:
# ~/.cache/airflow-kueue-provider/venv-docs (python3.11), reinstalled when docs/requirements.txt changes.
# mkdocstrings reads the provider's sources statically (griffe), so the provider itself is not installed.
# The site goes to ~/.cache/airflow-kueue-provider/site (DOCS_SITE_DIR to change), never into the repository.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE="${HOME}/.cache/airflow-kueue-provider"
VENV="${DOCS_VENV:-$CACHE/venv-docs}"
SITE="${DOCS_SITE_DIR:-$CACHE/site}"
PYTHON="${DOCS_PYTHON:-python3.11}"
REQS=docs/requirements.txt

stamp="$VENV/.requirements.sha256"
want="$(sha256sum "$REQS" | cut -d' ' -f1)"
if [ ! -x "$VENV/bin/mkdocs" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q -r "$REQS"
  echo "$want" >"$stamp"
fi

# (Material 9.8 prints a banner about MkDocs 2 on every build; the pins above are what this site is built with.)
NO_MKDOCS_2_WARNING=1 "$VENV/bin/mkdocs" build --strict --clean --site-dir "$SITE" "$@"
echo "docs: $SITE/index.html"
