"""The transport of :class:`~.kueue_async_hook.AsyncKueueHook`: kubernetes_asyncio loaded and configured
off the event loop, one client per session, and the request plumbing its calls share (a checked raw
response, paged LISTs, watch streams read line by line).

Nothing here may hold a triggerer's event loop, which runs every trigger of the process (Airflow warns
"Triggerer's async thread was blocked" past 0.2 s):

- importing this module is cheap: kubernetes_asyncio, aiohttp and the cncf hook (about 1 s of CPU together)
  are imported in a worker thread by the first :meth:`AsyncKueueSession.session` (:func:`load_clients`),
  and bound in this module and in every module that asked with :func:`bind_clients`;
- the connection's client configuration (kubeconfig parsing, certificate files, in-cluster token) is loaded
  in a worker thread, once per connection and process, and reused by every later session; it is read again
  when the connection or its kubeconfig file changes, and every time for exec-plugin credentials, which
  expire;
- LISTs come in pages of LIST_PAGE_SIZE objects, so parsing a namespace of 1,000 Jobs is many short steps,
  not one long one.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ..kueue.errors import KueueProviderError
from .cluster_target import DEFAULT_CONN_ID, ClusterTarget
from .retry import acall_with_retry

if TYPE_CHECKING:  # bound at run time by _import_clients(), in a worker thread
    import aiohttp
    from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook
    from kubernetes_asyncio import client as aclient
    from kubernetes_asyncio.client.rest import ApiException

# Every one-off request is bounded: a connection that stalls (a frozen proxy, a half-open socket) fails and is
# retried instead of holding a trigger -- or the shared watch's LIST -- forever. Watches have their own.
# An aiohttp.ClientTimeout(total=60, sock_connect=10), made by _import_clients().
REQUEST_TIMEOUT: Any = None
MANAGED_BY_SELECTOR = "app.kubernetes.io/managed-by=airflow-kueue-provider"
LIST_PAGE_SIZE = 100  # objects per LIST page: parsing one page is a few ms of the event loop's time

_load_lock = threading.Lock()
_loaded = False
_clients: dict[str, Any] = {}
"""The names _import_clients() bound (aclient, ApiException, REQUEST_TIMEOUT...), once it ran."""
_bound: list[dict[str, Any]] = [globals()]
"""The globals of each module that uses those names: this one and the hook's calls (see bind_clients)."""
# (cluster target, its extras and kubeconfig file version) -> the hook with its loaded configuration
_configs: dict[tuple[ClusterTarget, str], AsyncKubernetesHook] = {}

_Session = TypeVar("_Session", bound="AsyncKueueSession")


def bind_clients(namespace: dict[str, Any]) -> None:
    """Bind the client libraries' names in a module's ``globals()`` too, as in this one, once they are
    imported: ``aiohttp``, ``AsyncKubernetesHook``, ``aclient``, ``ApiException``, ``DELETE_ATTEMPTS``,
    ``KueueApiError`` and ``REQUEST_TIMEOUT`` (the module imports them under ``TYPE_CHECKING`` only)."""
    with _load_lock:
        _bound.append(namespace)
        namespace.update(_clients)


def _import_clients() -> None:
    """Import the Kubernetes client libraries and bind them in the modules that use them (run in a worker
    thread)."""
    global _loaded
    with _load_lock:
        if _loaded:
            return
        import aiohttp
        from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook
        from kubernetes_asyncio import client as aclient
        from kubernetes_asyncio.client.rest import ApiException

        from . import kueue_hook

        _clients.update(
            aiohttp=aiohttp,
            AsyncKubernetesHook=AsyncKubernetesHook,
            aclient=aclient,
            ApiException=ApiException,
            DELETE_ATTEMPTS=kueue_hook.DELETE_ATTEMPTS,
            KueueApiError=kueue_hook.KueueApiError,
            REQUEST_TIMEOUT=aiohttp.ClientTimeout(total=60, sock_connect=10),
        )
        for namespace in _bound:
            namespace.update(_clients)
        _loaded = True


def api_status(exc: BaseException) -> int | None:
    """The HTTP status of a kubernetes_asyncio ``ApiException`` (None for any other error), without importing
    kubernetes_asyncio: callers need not import it at module level (and so at a triggerer's first trigger)."""
    module = sys.modules.get("kubernetes_asyncio.client.exceptions")
    if module is not None and isinstance(exc, module.ApiException):
        return int(exc.status) if exc.status is not None else None
    return None


def is_connection_error(exc: BaseException) -> bool:
    """An aiohttp client error (a session closed under us, a reset connection), without importing aiohttp."""
    module = sys.modules.get("aiohttp")
    return module is not None and isinstance(exc, module.ClientError)


async def load_clients() -> None:
    """Import kubernetes_asyncio, aiohttp and the cncf hook off the event loop, once per process."""
    if not _loaded:
        await asyncio.to_thread(_import_clients)


async def _kubernetes_hook(target: ClusterTarget) -> AsyncKubernetesHook:
    """The cncf hook for ``target`` with its client configuration loaded, reused while nothing changed."""
    await load_clients()
    hook = AsyncKubernetesHook(conn_id=target.conn_id, **target.overrides())
    extras = await hook.get_conn_extras()  # in a triggerer: asked of its supervisor, asynchronously
    key = (target, _config_version(extras, target.config_file))
    cached = _configs.get(key)
    if cached is not None:
        return cached
    # kubeconfig parsing, certificate temp files, an in-cluster token: blocking work, done in a thread with
    # a loop of its own (the extras are already read, so it asks nothing of this loop's supervisor channel).
    await asyncio.to_thread(_run_blocking, hook._load_config)
    if hook._config_loaded:  # static credentials; exec-plugin tokens expire, so those load every time
        _configs[key] = hook
    return hook


def _config_version(extras: dict[str, Any], config_file: str | None = None) -> str:
    """The connection's extras and the kubeconfig file's mtime: a change means a new configuration."""
    path = config_file or extras.get("kube_config_path") or extras.get("extra__kubernetes__kube_config_path")
    try:
        mtime = os.stat(os.path.expanduser(path)).st_mtime_ns if path else 0
    except OSError:
        mtime = -1
    return json.dumps(extras, sort_keys=True, default=str) + f"@{mtime}"


def _run_blocking(coro_fn: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(_await(coro_fn))


async def _await(coro_fn: Callable[[], Awaitable[Any]]) -> Any:
    return await coro_fn()


ItemFilter = Callable[[dict[str, Any]], dict[str, Any]]
"""What a LIST keeps of each item as its page arrives (``_list_pages``)."""


class ListTooLong(RuntimeError, KueueProviderError):
    """A LIST has more items than the caller keeps (``max_items``): it stopped reading there."""

    def __init__(self, what: str, count: int, more: bool) -> None:
        super().__init__(f"{what}: {'more than ' if more else ''}{count} items")
        self.count, self.more = count, more


class AsyncKueueSession:
    """One ``kubernetes_asyncio`` client over the cncf ``kubernetes`` connection (see :meth:`session`), and
    the plumbing of the hook's calls (``AsyncKueueHook`` adds them, one mixin per kind of object)."""

    def __init__(self, kubernetes_conn_id: ClusterTarget | str = DEFAULT_CONN_ID) -> None:
        """``kubernetes_conn_id``: a connection id, or a ``ClusterTarget`` (the id with overrides)."""
        self.target = ClusterTarget.of(kubernetes_conn_id)
        self.kubernetes_conn_id = self.target.conn_id
        self._api: aclient.ApiClient | None = None
        self._version: str | None = None

    @asynccontextmanager
    async def session(self: _Session) -> AsyncIterator[_Session]:
        """Keep one client (one connection pool) open for the whole block. Its configuration is the
        process's loaded one for the connection; only the client (an SSL context, a pool) is new."""
        configured = await _kubernetes_hook(self.target)
        api = aclient.ApiClient(configuration=configured.client_configuration)
        self._api = api
        try:
            yield self
        finally:
            self._api = None
            await api.close()

    @property
    def api(self) -> aclient.ApiClient:
        if self._api is None:
            raise RuntimeError("AsyncKueueHook used outside `async with hook.session()`")
        return self._api

    async def get_raw(self, path: str) -> dict[str, Any]:
        async def call() -> dict[str, Any]:
            resp = await checked(
                self.api.call_api(
                    path,
                    "GET",
                    auth_settings=["BearerToken"],
                    _preload_content=False,
                    _request_timeout=REQUEST_TIMEOUT,
                    header_params={"Accept": "application/json"},
                )
            )
            raw = resp[0] if isinstance(resp, tuple) else resp
            return dict(json.loads(await raw.read()))

        return await acall_with_retry(call, f"GET {path}")

    async def _list_pages(
        self,
        list_fn: Callable[..., Any],
        what: str,
        keep: ItemFilter | None = None,
        max_items: int | None = None,
    ) -> tuple[list[dict[str, Any]], str]:
        """Every item of a LIST and its resourceVersion, read LIST_PAGE_SIZE at a time (one consistent
        snapshot: the apiserver serves the later pages from the first page's resourceVersion).

        ``keep`` reduces each item as its page arrives (the watch hub's slimming), so a namespace flooded with
        large objects costs one page at a time, not the whole LIST; past ``max_items`` the read stops with
        :class:`ListTooLong` (no more pages are fetched)."""
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            page_args: dict[str, Any] = {"limit": LIST_PAGE_SIZE}
            if token:
                page_args["_continue"] = token
            read_page = functools.partial(
                list_fn, **page_args, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
            )
            resp = await acall_with_retry(lambda: checked(read_page()), what)  # noqa: B023 - awaited at once
            doc = json.loads(await cast(Any, resp).read())
            page, version = items_and_version(doc)
            token = doc.get("metadata", {}).get("continue")
            del doc
            items += [keep(item) for item in page] if keep else page
            del page
            if max_items is not None and len(items) > max_items:
                raise ListTooLong(what, len(items), bool(token))
            if not token:
                return items, version

    async def _watch(self, func: Any, *args: Any, **kwargs: Any) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """(event type, raw object) pairs until the server closes the watch; 410 Gone raises ApiException;
        ``read_timeout`` seconds without a byte raise asyncio.TimeoutError (a stalled connection).

        The stream is read here, one JSON line per event, rather than through kubernetes_asyncio's Watch:
        that one builds a default ApiClient per watch (its SSL context loads the system CA bundle, ~0.1 s of
        the event loop, at every reconnect) and encodes and decodes every event once more for a model we do
        not use."""
        *positional, resource_version, timeout_seconds, read_timeout = args
        resp = await checked(
            func(
                *positional,
                watch=True,
                resource_version=resource_version,
                timeout_seconds=timeout_seconds,
                allow_watch_bookmarks=True,
                _preload_content=False,
                _request_timeout=aiohttp.ClientTimeout(
                    total=timeout_seconds + 30, sock_connect=10, sock_read=read_timeout
                ),
                **kwargs,
            )
        )
        try:
            while line := await resp.content.readline():
                event = json.loads(line)
                if event.get("type") == "ERROR":  # e.g. 410 Gone: the resourceVersion is too old
                    status = event.get("object") or {}
                    raise ApiException(
                        status=status.get("code"), reason=f"{status.get('reason')}: {status.get('message')}"
                    )
                yield str(event["type"]), dict(event["object"])
        finally:
            resp.release()


async def checked(pending: Awaitable[Any]) -> Any:
    """The raw response of a call made with ``_preload_content=False``, which kubernetes_asyncio returns
    whatever its status: a non-2xx one raises ApiException here, as a preloaded call would (status, reason,
    body, headers for Retry-After), so a 404 is not read as an object, a 403 on a LIST not as an empty
    list, and a 429 or 5xx is retried."""
    resp = await pending
    raw = resp[0] if isinstance(resp, tuple) else resp
    status = int(getattr(raw, "status", 200))
    if 200 <= status <= 299:
        return resp
    try:
        body = await raw.read()
    finally:
        raw.release()
    exc = ApiException(status=status, reason=str(getattr(raw, "reason", "") or ""))
    exc.body = body  # bytes, as a preloaded call's ApiException has it (``describe`` reads it as JSON)
    exc.headers = getattr(raw, "headers", None)
    raise exc


def items_and_version(doc: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    return list(doc.get("items") or []), str(doc.get("metadata", {}).get("resourceVersion", ""))
