"""``KueueHook.test_connection``'s answers for what the bed cannot show: no Kueue, a Kueue too old, another
HTTP refusal (the bed test covers a good connection, a refused token, an unreachable server)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from airflow_kueue_provider.hooks.kueue_hook import KueueHook


class FakeApi:
    configuration = SimpleNamespace(host="https://cluster.example:6443")

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def call_api(self, path: str, method: str, **kwargs: Any) -> Any:
        assert (path, method) == ("/apis/kueue.x-k8s.io", "GET") and kwargs["_request_timeout"] == 10
        if isinstance(self.answer, Exception):
            raise self.answer
        return (SimpleNamespace(data=json.dumps(self.answer).encode()), 200, {})


def _hook(answer: Any) -> KueueHook:
    hook = KueueHook("kubernetes_default")
    hook.__dict__["api"] = FakeApi(answer)  # the cached_property's slot
    return hook


@pytest.mark.parametrize(
    ("answer", "ok", "says"),
    [
        ({"versions": [{"version": "v1beta2"}, {"version": "v1beta1"}]}, True, "kueue.x-k8s.io/v1beta2"),
        (ApiException(status=404, reason="Not Found"), False, "serves no kueue.x-k8s.io: install Kueue"),
        ({"versions": [{"version": "v1alpha1"}]}, False, "in no version this provider reads"),
        (ApiException(status=503, reason="Service Unavailable"), False, "HTTP 503 Service Unavailable"),
    ],
)
def test_the_answer_names_the_version_or_the_cause(answer: Any, ok: bool, says: str) -> None:
    got, message = _hook(answer).test_connection()
    assert got is ok and says in message, message
