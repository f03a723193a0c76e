"""A fork server for ``airflow dags test``: Airflow and the provider imported once per home, each run a fork.

A run of ``airflow dags test`` spends more than half of its CPU importing (py-spy on the bed: 55 % of a
trivial DAG's 12 s, 2026-12-06), and the suite runs dozens. The server (``python -m
tests.integration.dag_test_server SOCKET``, started with the home's environment) imports what a run imports,
then forks one child per request: the child starts a session of its own (so ``os.killpg(pid, SIGKILL)``
kills the run as it kills a ``Popen``'s), takes the request's environment and log file as its own and runs
the CLI or the script; the server reports the child's exit status the way ``Popen.returncode`` does
(``-signal`` when killed).

Only environment keys read at run time may differ from the server's (connections, variables, the provider's
own ``AIRFLOW_KUEUE_*``); a run asked with any other difference (a config option, another home) is started
as a plain process (``ForkedRuns.start`` returns None).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

PRELOAD = (
    "airflow",
    "airflow.__main__",
    "airflow.cli.cli_parser",
    "airflow.cli.commands.dag_command",
    "airflow.sdk",
    "airflow.sdk.definitions.dag",
    "airflow.sdk.execution_time.supervisor",
    "airflow.sdk.execution_time.task_runner",
    "airflow.sdk.execution_time.comms",
    "airflow.sdk.api.client",
    "airflow.api_fastapi.execution_api.app",
    "airflow.api_fastapi.execution_api.routes",
    "airflow.dag_processing.dagbag",
    "airflow.dag_processing.collection",
    "airflow.serialization.serialized_objects",
    "airflow.models.dagrun",
    "airflow.models.taskinstance",
    "airflow.jobs.triggerer_job_runner",
    "airflow.providers.cncf.kubernetes.operators.job",
    "airflow_kueue_provider.operators",
    "airflow_kueue_provider.operators.kueue_job",
    "airflow_kueue_provider.triggers",
    "airflow_kueue_provider.decorators",
    "airflow_kueue_provider.hooks.kueue_hook",
    "airflow_kueue_provider.hooks.kueue_async_hook",
    "airflow_kueue_provider.hooks.blob_store",
    "airflow_kueue_provider.watch.namespace_watch",
    "kubernetes.client",
    "kubernetes_asyncio.client",
    "azure.storage.blob",
    "azure.storage.blob.aio",
)
PRELOAD_ENV = "DAG_TEST_SERVER_PRELOAD"
"""``0``: import nothing ahead (the server's own tests)."""
RUN_TIME_KEYS = ("AIRFLOW_CONN_", "AIRFLOW_VAR_", "AIRFLOW_KUEUE_")
"""Environment keys read when used, not at import: a request may differ from the server in these only."""


def _same_at_import(a: dict[str, str], b: dict[str, str]) -> bool:
    keys = {k for k in a.keys() | b.keys() if not k.startswith(RUN_TIME_KEYS)}
    return all(a.get(k) == b.get(k) for k in keys)


def _child(request: dict[str, Any]) -> None:
    """In the fork: become the run (never returns)."""
    code = 1
    try:
        os.setsid()
        log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.environ.clear()
        os.environ.update(request["env"])
        argv = request["argv"]
        try:
            if argv[:1] == ["-c"]:
                sys.argv = ["-c"]
                exec(compile(argv[1], "<dag test>", "exec"), {"__name__": "__main__"})
            else:
                from airflow.__main__ import main

                sys.argv = ["airflow", *argv]
                main()  # type: ignore[no-untyped-call]
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _serve_one(conn: socket.socket, pid: int) -> None:
    """Tell the client the child's pid, then its exit status when it ends."""
    with conn:
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        _, status = os.waitpid(pid, 0)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps({"code": code}).encode() + b"\n")


def serve(path: str) -> None:
    for name in PRELOAD if os.environ.get(PRELOAD_ENV, "1") != "0" else ():
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    parent = os.getppid()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(16)
    server.settimeout(2.0)
    print("ready", flush=True)
    while os.getppid() == parent:  # the test process is gone: so is the server
        try:
            conn, _ = server.accept()
        except TimeoutError:
            continue
        conn.settimeout(None)
        request = json.loads(conn.makefile("rb").readline())
        pid = os.fork()
        if pid == 0:
            server.close()
            conn.close()
            _child(request)
        threading.Thread(target=_serve_one, args=(conn, pid), daemon=True).start()


class ForkedRun:
    """What a ``BackgroundDagRun`` asks of a ``Popen``: ``pid``, ``poll``, ``wait``."""

    def __init__(self, conn: socket.socket, argv: list[str]) -> None:
        self._conn, self._buf, self.args = conn, b"", argv
        line = self._line(60.0)
        if not line:
            conn.close()
            raise RuntimeError("the dag test server forked no run")
        self.pid: int = json.loads(line)["pid"]
        self.returncode: int | None = None

    def _line(self, timeout: float | None) -> bytes | None:
        """The next line from the server (b"" once it closed), or None when none came within ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self._conn], [], [], left)[0]:
                return None
            data = self._conn.recv(4096)
            if not data:
                line, self._buf = self._buf, b""
                return line
            self._buf += data
        line, self._buf = self._buf.split(b"\n", 1)
        return line

    def _read_code(self, timeout: float | None) -> int | None:
        if self.returncode is not None:
            return self.returncode
        line = self._line(timeout)
        if line is None:
            return None
        self.returncode = json.loads(line)["code"] if line else -signal.SIGKILL
        self._conn.close()
        return self.returncode

    def poll(self) -> int | None:
        return self._read_code(0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._read_code(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return code


class ForkedRuns:
    """One server per environment it was started with; ``start`` forks a run of it."""

    def __init__(self, env: dict[str, str], home: Path) -> None:
        self.env = dict(env)
        self.path = str(home / "dag-test.sock")
        self._proc: subprocess.Popen[bytes] | None = None

    def _server(self) -> bool:
        if self._proc is not None and self._proc.poll() is None:
            return True
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.dag_test_server", self.path],
            env=self.env,
            cwd=Path(__file__).resolve().parents[2],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        ready = self._proc.stdout.readline() if self._proc.stdout else b""
        return ready.strip() == b"ready"

    def start(self, argv: list[str], env: dict[str, str], log: str) -> ForkedRun | None:
        """A forked run of ``airflow ARGV`` (or ``["-c", script]``), or None: start it as a plain process."""
        if not _same_at_import(self.env, env) or not self._server():
            return None
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        for attempt in range(50):
            try:
                conn.connect(self.path)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                time.sleep(0.1 * (attempt + 1))
        else:
            conn.close()
            return None
        conn.sendall(json.dumps({"argv": argv, "env": env, "log": log}).encode() + b"\n")
        return ForkedRun(conn, argv)

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()


if __name__ == "__main__":
    serve(sys.argv[1])
