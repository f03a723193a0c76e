"""Kubernetes naming rules: DNS-1123 names, label values, qualified keys, env var names, safe label values.

Plain predicates over the API server's validation rules, so a bad name is caught before anything is
submitted, and ``safe_label_value`` which turns any text into a valid, deterministic label value.
"""

from __future__ import annotations

import hashlib
import json
import re

LABEL_VALUE_MAX_LENGTH = 63
DNS1123_LABEL_MAX_LENGTH = 63
DNS1123_SUBDOMAIN_MAX_LENGTH = 253
QUALIFIED_NAME_MAX_LENGTH = 63
MAX_JOB_NAME_LENGTH = 52
"""Pods of an Indexed Job are named ``<job>-<index>-<random5>``, their hostname ``<job>-<index>`` must be a
DNS label (<= 63) and Kueue names the Workload ``job-<job>-<hash5>``; 52 leaves room for all of them."""
HASH_LENGTH = 10
"""Hex digits of sha256 that ``safe_label_value`` and ``short_hash`` keep."""

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", re.ASCII)
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", re.ASCII)
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?", re.ASCII)
_QUALIFIED_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]", re.ASCII)
# The portable C-identifier-like rule (Kubernetes >= 1.34 also accepts any printable ASCII except '=').
_ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*", re.ASCII)


def is_dns1123_label(value: object, max_length: int = DNS1123_LABEL_MAX_LENGTH) -> bool:
    return isinstance(value, str) and len(value) <= max_length and bool(_DNS1123_LABEL.fullmatch(value))


def is_dns1123_subdomain(value: object) -> bool:
    return (
        isinstance(value, str)
        and len(value) <= DNS1123_SUBDOMAIN_MAX_LENGTH
        and bool(_DNS1123_SUBDOMAIN.fullmatch(value))
    )


def is_valid_label_value(value: object) -> bool:
    return (
        isinstance(value, str)
        and len(value) <= LABEL_VALUE_MAX_LENGTH
        and bool(_LABEL_VALUE.fullmatch(value))
    )


def is_qualified_name(key: object) -> bool:
    """A label/annotation key: ``[prefix/]name``, prefix a DNS subdomain, name <= 63 characters."""
    if not isinstance(key, str):
        return False
    prefix, _, name = key.rpartition("/")
    if "/" in key and not is_dns1123_subdomain(prefix):
        return False
    return len(name) <= QUALIFIED_NAME_MAX_LENGTH and bool(_QUALIFIED_NAME_PART.fullmatch(name))


def is_env_var_name(name: object) -> bool:
    """A container env var name: letters, digits, ``_``, ``-`` or ``.``, not starting with a digit."""
    return isinstance(name, str) and bool(_ENV_NAME.fullmatch(name))


def short_hash(*parts: str) -> str:
    """``HASH_LENGTH`` hex digits of a sha256 over ``parts`` (JSON-encoded, so part boundaries count)."""
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:HASH_LENGTH]


def safe_label_value(value: str) -> str:
    """``value`` itself when it is a valid label value, else a readable prefix + ``-`` + 10 hex of sha256.

    Airflow run ids (``manual__2026-05-01T10:00:00+00:00``) contain ``:`` and ``+``, and dag/task ids may
    exceed 63 characters. The hash is of the full value, so distinct values stay distinct; the full value is
    kept in an annotation. Deterministic, so a selector built from the same value finds the Job again.
    """
    if is_valid_label_value(value):
        return value
    digest = hashlib.sha256(value.encode()).hexdigest()[:HASH_LENGTH]
    readable = re.sub(r"[^A-Za-z0-9_.-]", "_", value)[: LABEL_VALUE_MAX_LENGTH - HASH_LENGTH - 1]
    readable = re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", readable)
    return f"{readable}-{digest}" if readable else digest


def dns_fragment(text: str) -> str:
    """``text`` lower-cased, each run of characters other than ``[a-z0-9]`` made one ``-``, no outer ``-``."""
    fragment = re.sub(r"[^a-z0-9]+", "-", text.lower())
    return fragment.strip("-")
