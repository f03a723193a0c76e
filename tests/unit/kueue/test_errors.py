"""Every error the provider and the worker SDK raise on purpose shares one base, ``KueueProviderError``."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import airflow_kueue_provider
from airflow_kueue_provider.kueue.errors import KueueProviderError

NOT_ERRORS = {
    "ShardsFailed",  # SystemExits: the SDK's ways out of the process, not for ``except Exception``
    "ShardAlreadyDone",
    "_Conflicted",  # private control flow of the queue setup hook
    "KindsChanged",  # private control flow of the watch hub
}


def _exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(airflow_kueue_provider.__path__, "airflow_kueue_provider."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
            ):
                found[f"{module.__name__}.{name}"] = value
    return found


def test_every_error_of_the_provider_is_a_kueue_provider_error() -> None:
    classes = _exception_classes()
    assert len(classes) >= 30, sorted(classes)
    outside = [
        path
        for path, cls in classes.items()
        if not issubclass(cls, KueueProviderError) and path.rsplit(".", 1)[1] not in NOT_ERRORS
    ]
    assert not outside, f"errors without the provider's base: {outside}"


def test_the_base_is_caught_as_an_exception_and_keeps_what_each_error_is_to_its_callers() -> None:
    from airflow_kueue_provider.kueue.spec.job_spec import InvalidJobSpec
    from airflow_kueue_provider.storage.blob_errors import BlobConfigError

    assert issubclass(InvalidJobSpec, ValueError) and issubclass(InvalidJobSpec, KueueProviderError)
    assert issubclass(BlobConfigError, ValueError) and issubclass(BlobConfigError, KueueProviderError)
    assert issubclass(KueueProviderError, Exception)
