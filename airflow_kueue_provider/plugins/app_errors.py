"""How the UI's app answers an error: a page asked without a login goes to Airflow's login, and a refusal
or failure of the cluster says what the connection's identity lacks (JSON for ``/api/``, a page else)."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from kubernetes.client.rest import ApiException
from starlette.exceptions import HTTPException as StarletteHTTPException

from . import dashboard_pages

log = logging.getLogger(__name__)


def login_url(next_url: str) -> str | None:
    """The auth manager's login page (under Airflow's base path), returning to ``next_url``."""
    try:
        from airflow.api_fastapi.app import get_auth_manager

        return str(get_auth_manager().get_url_login(next_url=next_url))
    except Exception:
        log.warning("Kueue pages: no login URL from Airflow's auth manager", exc_info=True)
        return None


async def not_logged_in(request: Request, exc: StarletteHTTPException) -> Response:
    """A page (not ``/api/``) asked without a valid login goes to Airflow's login, which comes back."""
    path = getattr(request.scope.get("route"), "path", "") or request.url.path
    if exc.status_code == 401 and not path.startswith("/api/"):
        login = login_url(str(request.url))
        if login:
            return RedirectResponse(login, status_code=303)
    return await http_exception_handler(request, exc)


async def cluster_error(request: Request, exc: ApiException) -> Response:
    """The cluster's refusal or failure as 502, with what to grant when it refused the connection."""
    hint = (
        " Give the connection's identity get/list/watch on Jobs, Workloads, Kueue queues and Events "
        "(deploy/rbac/ui.yaml), or name the namespaces it may read in [kueue] ui_namespaces."
        if exc.status in (401, 403)
        else ""
    )
    message = f"the cluster answered {exc.status} {exc.reason}.{hint}"
    if getattr(request.scope.get("route"), "path", "").startswith("/api/"):
        return JSONResponse({"error": message}, status_code=502)
    page = dashboard_pages.error_page(f"The Kueue view could not read the cluster: {message}")
    return HTMLResponse(page, status_code=502)


def add_error_handlers(app: FastAPI) -> None:
    """The app's handlers of a missing login and of the cluster's errors."""
    app.add_exception_handler(StarletteHTTPException, not_logged_in)  # type: ignore[arg-type]
    app.add_exception_handler(ApiException, cluster_error)
