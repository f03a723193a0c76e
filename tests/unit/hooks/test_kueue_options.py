"""Typed [kueue] options: one declaration per option, one validator, a bad value named at the first read."""

from __future__ import annotations

import configparser
from pathlib import Path
from typing import Any

import pytest

from airflow_kueue_provider.get_provider_info import get_provider_info
from airflow_kueue_provider.hooks import kueue_config
from airflow_kueue_provider.hooks.kueue_config import ConfigSource
from airflow_kueue_provider.hooks.kueue_options import (
    BOOLEAN,
    INTEGER,
    OPTIONS,
    KueueOptionError,
    option_count,
    option_text,
    option_values,
    parse_option,
)


def _source(monkeypatch: pytest.MonkeyPatch, **options: str) -> None:
    env = {f"AIRFLOW__KUEUE__{key.upper()}": value for key, value in options.items()}
    monkeypatch.setattr(kueue_config, "current_source", lambda: ConfigSource(env))


def test_the_provider_publishes_each_option_with_the_type_it_is_parsed_as() -> None:
    published = get_provider_info()["config"]["kueue"]["options"]
    assert set(published) == set(OPTIONS)
    for key, entry in published.items():
        assert entry["type"] == OPTIONS[key].type, key
        if entry["default"] not in (None, ""):
            parse_option(key, str(entry["default"]))  # every published default parses
    assert published["allow_privileged_pods"]["type"] == BOOLEAN
    assert published["watch_max_mib"]["type"] == INTEGER
    assert published["default_queue_name"]["type"] == "string"


@pytest.mark.parametrize(("raw", "expected"), [("True", True), ("yes", True), (" 1 ", True), ("off", False)])
def test_a_flag_reads_the_usual_words(raw: str, expected: bool) -> None:
    assert parse_option("allow_host_namespaces", raw) is expected


def test_unset_or_blank_takes_the_default() -> None:
    assert parse_option("allow_host_namespaces", None) is False
    assert parse_option("ui_reads_total", "  ") == 32
    assert parse_option("ui_namespaces", None) == ""


@pytest.mark.parametrize(
    ("option", "raw", "expected"),
    [
        ("allow_privileged_pods", "ture", "true or false"),
        ("watch_max_objects", "lots", "a whole number of at least 1"),
        ("ui_streams_total", "0", "a whole number of at least 1"),
    ],
)
def test_a_bad_value_names_the_option_the_value_and_the_form(option: str, raw: str, expected: str) -> None:
    with pytest.raises(KueueOptionError) as raised:
        parse_option(option, raw)
    message = str(raised.value)
    assert f"[kueue] {option} must be {expected}" in message and repr(raw) in message
    assert f"AIRFLOW__KUEUE__{option.upper()}" in message


def test_a_bad_option_fails_the_first_read_of_any_other(monkeypatch: pytest.MonkeyPatch) -> None:
    _source(monkeypatch, allow_host_path_volumes="maybe", ui_namespaces="a,b")
    with pytest.raises(KueueOptionError, match=r"\[kueue\] allow_host_path_volumes must be true or false"):
        option_text("ui_namespaces")


def test_the_typed_read_comes_from_the_process_source(monkeypatch: pytest.MonkeyPatch) -> None:
    _source(monkeypatch, watch_max_mib="64", allow_host_namespaces="true")
    assert option_count("watch_max_mib") == 64
    assert option_values(("allow_host_namespaces",)) == {"allow_host_namespaces": True}
    assert option_text("kubernetes_conn_id") == "kubernetes_default"


def test_one_typed_read_parses_the_config_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The UI reads ``ui_namespaces`` per request: checking every option must not parse the file 25 times."""
    (tmp_path / "airflow.cfg").write_text("[kueue]\nui_namespaces = a,b\nwatch_max_mib = 64\n")
    monkeypatch.setattr(kueue_config, "current_source", lambda: ConfigSource({"AIRFLOW_HOME": str(tmp_path)}))
    reads: list[object] = []
    real_read = configparser.RawConfigParser.read

    def counted(self: configparser.RawConfigParser, *args: Any, **kwargs: Any) -> list[str]:
        reads.append(args)
        return real_read(self, *args, **kwargs)

    monkeypatch.setattr(configparser.RawConfigParser, "read", counted)
    assert option_text("ui_namespaces") == "a,b" and option_count("watch_max_mib") == 64
    assert len(reads) == 2
