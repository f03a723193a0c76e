"""A real Airflow deployment as a test bed: PostgreSQL, an API server, a scheduler (LocalExecutor), a DAG
processor and one or more triggerers, each its own process (group), on loopback ports.

Tests drive it as users do: DAG files in the DAG folder, runs triggered and read back through the REST API
(``/api/v2``, a JWT from ``/auth/token`` with the simple auth manager's generated password). The metadata
database is a fresh copy of a migrated template, so a deployment starts in seconds after the first one.

    python -m tests.integration.deployment up [--triggerers 2] [--dags example_dags]  # make airflow-up
    python -m tests.integration.deployment status
    python -m tests.integration.deployment down

PostgreSQL is Debian's server package (``/usr/lib/postgresql/<major>/bin``, or ``POSTGRES_BIN``), run as
the ``postgres`` user when we are root (``initdb`` refuses root). Every log stays in the AIRFLOW_HOME
(``logs/<component>.log``), and the Postgres log beside its data directory. The triggerers run at nice -10
and everything else at nice 10, as if each triggerer had a node of its own.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from .loop_sampler import LoopThreadSampler, LoopUsage

AIRFLOW = str(Path(sys.executable).with_name("airflow"))
REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "airflow-kueue-deployment"
BLOCKED_THREAD = "async thread was blocked"  # airflow/jobs/triggerer_job_runner.py, block_watchdog()
BLOCKED_FOR = re.compile(r"blocked for ([0-9.]+) seconds")
START_MARKER = "\n===== "  # opens each start's part of a component log
TEMPLATE_DB = "airflow"
TRIGGERER_NICENESS = -10  # as root; see AirflowDeployment._argv
OTHERS_NICENESS = 10  # every component but the triggerers


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(what: str, fn: Any, timeout: float, interval: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what} (last value: {last!r})")


# --- PostgreSQL --------------------------------------------------------------------------------------------
def postgres_bin() -> Path | None:
    """Debian's server binaries (the newest major installed), POSTGRES_BIN, or None."""
    if env := os.environ.get("POSTGRES_BIN"):
        return Path(env)
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parent.parent.name)
    )
    return found[-1].parent if found else None


def _pg_user() -> pwd.struct_passwd | None:
    """Whom the server runs as: ``postgres`` when we are root (initdb refuses root), else ourselves."""
    return pwd.getpwnam("postgres") if os.geteuid() == 0 else None


def _as_pg_user() -> dict[str, Any]:
    user = _pg_user()
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []} if user else {}


def _chown_tree(path: Path) -> None:
    user = _pg_user()
    if user is None:
        return
    os.chown(path, user.pw_uid, user.pw_gid)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            os.chown(os.path.join(root, name), user.pw_uid, user.pw_gid, follow_symlinks=False)


@dataclass
class Postgres:
    """One PostgreSQL server on a loopback port, trust auth for the ``airflow`` superuser, fsync off."""

    bin_dir: Path
    base: Path  # owned by the server's user: data/, the socket, postgres.log
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    @property
    def data(self) -> Path:
        return self.base / "data"

    @property
    def log_path(self) -> Path:
        return self.base / "postgres.log"

    def url(self, database: str) -> str:
        return f"postgresql+psycopg2://airflow@127.0.0.1:{self.port}/{database}"

    @classmethod
    def new_base(cls, bin_dir: Path) -> Postgres:
        base = Path(tempfile.mkdtemp(prefix="airflow-kueue-pg-"))
        _chown_tree(base)
        return cls(bin_dir, base)

    def initdb(self) -> None:
        argv = [str(self.bin_dir / "initdb"), "-D", str(self.data), "-U", "airflow", "-A", "trust"]
        subprocess.run(
            [*argv, "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"],
            check=True,
            capture_output=True,
            **_as_pg_user(),
        )

    def copy_data_from(self, data: Path) -> None:
        shutil.copytree(data, self.data, symlinks=True)
        _chown_tree(self.base)
        for stale in ("postmaster.pid", "postmaster.opts"):
            (self.data / stale).unlink(missing_ok=True)

    def start(self, port: int | None = None) -> None:
        self.port = port or free_port()
        settings = {
            "listen_addresses": "127.0.0.1",
            "unix_socket_directories": str(self.base),
            "max_connections": "300",
            "shared_buffers": "64MB",
            "fsync": "off",  # a throwaway test database: speed over durability
            "synchronous_commit": "off",
            "full_page_writes": "off",
        }
        argv = [str(self.bin_dir / "postgres"), "-D", str(self.data), "-p", str(self.port)]
        for key, value in settings.items():
            argv += ["-c", f"{key}={value}"]
        log = open(self.log_path, "ab")  # noqa: SIM115 - the server keeps it
        self.proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, **_as_pg_user()
        )
        log.close()

        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited {self.proc.returncode}:\n{self.log_tail()}")
            return self.sql("postgres", "SELECT 1", fail_ok=True) is not None

        wait_until("postgres accepting connections", ready, timeout=60, interval=0.3)

    def sql(
        self, database: str, query: str, *args: Any, fail_ok: bool = False
    ) -> list[tuple[Any, ...]] | None:
        import psycopg2

        try:
            conn = psycopg2.connect(
                host="127.0.0.1", port=self.port, user="airflow", dbname=database, connect_timeout=5
            )
        except psycopg2.OperationalError:
            if fail_ok:
                return None
            raise
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(query, args or None)
                return list(cur.fetchall()) if cur.description else []
        finally:
            conn.close()

    def create_database(self, name: str, template: str | None = None) -> None:
        clause = f' TEMPLATE "{template}"' if template else ""
        self.sql("postgres", f'CREATE DATABASE "{name}"{clause}')

    def stop(self, remove: bool = True) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGINT)  # fast shutdown
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if remove:
            shutil.rmtree(self.base, ignore_errors=True)

    def log_tail(self, lines: int = 40) -> str:
        return tail(self.log_path, lines)


def migrated_template(bin_dir: Path, airflow_env: dict[str, str]) -> Path:
    """A PostgreSQL data directory whose database ``airflow`` is migrated to the installed Airflow.

    Built once per Airflow and PostgreSQL version under ~/.cache (``airflow db migrate`` takes 30-60 s on
    2 busy cores) and copied for each server after that; a file lock makes parallel builders wait.
    """
    import airflow

    key = f"pg{bin_dir.parent.name}-airflow{airflow.__version__}"
    target = CACHE / key
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / "PG_VERSION").exists():
            return target
        pg = Postgres.new_base(bin_dir)
        try:
            pg.initdb()
            pg.start()
            pg.create_database(TEMPLATE_DB)
            home = Path(tempfile.mkdtemp(prefix="airflow-kueue-migrate-"))
            env = {
                **_clean_env(airflow_env),
                "AIRFLOW_HOME": str(home),
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": pg.url(TEMPLATE_DB),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            }
            res = subprocess.run(
                [AIRFLOW, "db", "migrate"], env=env, capture_output=True, text=True, timeout=900, check=False
            )
            shutil.rmtree(home, ignore_errors=True)
            if res.returncode != 0:
                raise RuntimeError(
                    f"airflow db migrate exited {res.returncode}:\n{res.stdout[-3000:]}{res.stderr[-3000:]}"
                )
            pg.stop(remove=False)
            partial = target.with_name(key + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            shutil.copytree(pg.data, partial, symlinks=True)
            partial.rename(target)
        finally:
            pg.stop(remove=True)
    return target


# --- Airflow components -------------------------------------------------------------------------------------
def started_postgres(devcluster_env: dict[str, str]) -> Postgres:
    """A PostgreSQL server of its own, its data a copy of the migrated template, started; skipped (failed on
    CI) when the server binaries are missing."""
    import pytest

    bin_dir = postgres_bin()
    if bin_dir is None:
        message = "PostgreSQL server binaries not found: apt-get install postgresql (or set POSTGRES_BIN)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    template = migrated_template(bin_dir, {**os.environ, **devcluster_env})
    server = Postgres.new_base(bin_dir)
    server.copy_data_from(template)
    server.start()
    return server


def tail(path: Path, lines: int = 60) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def _clean_env(base: dict[str, str]) -> dict[str, str]:
    """The caller's environment less any Airflow settings (an AIRFLOW__* from a test would win over ours)."""
    return {
        k: v
        for k, v in base.items()
        if not k.startswith("AIRFLOW__")
        and k not in ("AIRFLOW_HOME", "AIRFLOW_CONFIG", "PYTEST_CURRENT_TEST")
    }


def _descendants(pid: int) -> list[int]:
    import psutil

    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return []


@dataclass
class Component:
    """One Airflow command in a process group of its own, its output appended to ``logs/<name>.log``."""

    name: str
    argv: list[str]
    log_path: Path
    pid: int | None = None
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    killed: bool = False  # on purpose: its exit is no failure

    def start(self, env: dict[str, str], cwd: Path) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.starts += 1
            self.killed = False
            started = f"{time.strftime('%H:%M:%S')} start #{self.starts}: {' '.join(self.argv)}\n"
            log.write(f"{START_MARKER}{started}".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.argv, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.pid = self.proc.pid

    def alive(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None
        if self.pid is None:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def kill(self, sig: int = signal.SIGKILL, wait: float = 30) -> None:
        """Signal the whole group (a triggerer's runner, a scheduler's executor workers); with SIGKILL also
        every descendant that made a group of its own (task processes)."""
        self.killed = True
        if self.pid is None or not self.alive():
            return
        children = _descendants(self.pid) if sig == signal.SIGKILL else []
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, sig)
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                os.killpg(self.pid, signal.SIGKILL)
                self.proc.wait()
        else:
            with contextlib.suppress(TimeoutError):
                wait_until(f"{self.name} gone", lambda: not self.alive(), timeout=wait, interval=0.2)

    def stop(self, grace: float = 5) -> None:
        """SIGTERM (what a supervisor sends), then SIGKILL after ``grace`` seconds; descendants go too."""
        self.finish_stop(self.begin_stop(), grace)

    def begin_stop(self) -> list[int]:
        """SIGTERM to the group without waiting (``finish_stop`` waits): a deployment stops all its
        components at once. Returns the descendants to end afterwards."""
        if self.pid is None or not self.alive():
            return []
        children = _descendants(self.pid)
        self.killed = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGTERM)
        return children

    def finish_stop(self, children: list[int], grace: float = 5) -> None:
        """Wait up to ``grace`` seconds for the exit ``begin_stop`` asked for, then SIGKILL what is left."""
        try:
            if self.proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=grace)
            elif self.pid is not None:
                with contextlib.suppress(TimeoutError):
                    wait_until(f"{self.name} gone", lambda: not self.alive(), timeout=grace, interval=0.2)
        finally:
            self.kill(signal.SIGKILL)
            for child in children:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child, signal.SIGKILL)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@dataclass(frozen=True)
class LoopStall:
    """One "async thread was blocked for N seconds" warning of a triggerer."""

    when: datetime  # when the watchdog logged it, at the stall's end
    seconds: float
    line: str
    usage: LoopUsage | None  # None: the loop thread was not sampled across the stall

    @classmethod
    def from_line(cls, line: str, sampler: LoopThreadSampler | None) -> LoopStall:
        when = datetime.fromisoformat(line.split()[0].replace("Z", "+00:00"))
        found = BLOCKED_FOR.search(line)
        seconds = float(found.group(1)) if found else 0.0
        end = when.timestamp()
        usage = sampler.usage(end - seconds, end) if sampler else None
        return cls(when, seconds, line, usage)

    @property
    def starved(self) -> bool:
        """The loop waited for a CPU; no trigger held it (LoopUsage.explains_as_starvation)."""
        return self.usage is not None and self.usage.explains_as_starvation(self.seconds)

    def describe(self) -> str:
        return f"{self.line}\n    ({self.usage.describe() if self.usage else 'loop thread not sampled'})"


@dataclass
class AirflowDeployment:
    """The processes of one Airflow deployment on one PostgreSQL database."""

    home: Path
    postgres: Postgres
    database: str
    env: dict[str, str]
    api_port: int
    components: dict[str, Component] = field(default_factory=dict)
    triggerer_jobs: dict[str, int] = field(default_factory=dict)  # component -> TriggererJob id, latest start
    triggerer_job_history: dict[str, list[int]] = field(default_factory=dict)  # ... of each start, in order
    component_env: dict[str, dict[str, str]] = field(default_factory=dict)  # "triggerer" -> its extra env
    loop_samplers: dict[int, LoopThreadSampler] = field(default_factory=dict)  # TriggererJob id -> sampler
    _rest: RestClient | None = None

    @classmethod
    def create(
        cls,
        home: Path,
        postgres: Postgres,
        database: str,
        cluster_env: dict[str, str],
        config: dict[str, str] | None = None,
        api_port: int | None = None,
    ) -> AirflowDeployment:
        """``config`` keys are ``section.option`` (``{"triggerer.job_heartbeat_sec": "2"}``)."""
        (home / "dags").mkdir(parents=True, exist_ok=True)
        api_port = api_port or free_port()
        settings = {
            "core.dags_folder": str(home / "dags"),
            "core.load_examples": "False",
            "core.executor": "LocalExecutor",
            "core.parallelism": "8",  # LocalExecutor worker processes; 2 cores
            "core.dags_are_paused_at_creation": "False",
            "core.fernet_key": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
            "core.execution_api_server_url": f"http://127.0.0.1:{api_port}/execution/",
            "core.simple_auth_manager_users": "admin:admin",
            "api.base_url": f"http://127.0.0.1:{api_port}/",
            "api.workers": "1",
            "api.secret_key": secrets.token_hex(16),
            "api_auth.jwt_secret": secrets.token_hex(32),
            "database.sql_alchemy_conn": postgres.url(database),
            "dag_processor.refresh_interval": "3",  # new DAG files are parsed within seconds
            "dag_processor.parsing_processes": "1",
            "logging.logging_level": "INFO",
            "logging.colored_console_log": "False",
            **(config or {}),
        }
        env = {
            **_clean_env(dict(os.environ)),
            **cluster_env,
            "AIRFLOW_HOME": str(home),
            **{
                # "common.io.xcom_objectstorage_path" is section "common.io": AIRFLOW__COMMON_IO__...
                f"AIRFLOW__{k.rsplit('.', 1)[0].replace('.', '_').upper()}__{k.rsplit('.', 1)[1].upper()}": v
                for k, v in settings.items()
            },
        }
        deployment = cls(home, postgres, database, env, api_port)
        deployment.write_env_file()
        return deployment

    # --- processes ---
    def _argv(self, name: str) -> list[str]:
        """The triggerers run at nice -10 (when we may raise priority: as root) and the rest at nice 10 (the
        scheduler's task processes too), as if each triggerer had a node of its own: on 2 busy cores, task
        processes parsing DAGs and other test runs would otherwise starve its event loop and trip Airflow's
        blocked-thread watchdog, whatever the triggers do."""
        if name.startswith("triggerer"):
            argv = [AIRFLOW, "triggerer", "--skip-serve-logs"]
            return ["nice", "-n", str(TRIGGERER_NICENESS), *argv] if os.geteuid() == 0 else argv
        if name == "api-server":
            argv = [AIRFLOW, "api-server", "--host", "127.0.0.1", "--port", str(self.api_port)]
        elif name == "scheduler":
            argv = [AIRFLOW, "scheduler", "--skip-serve-logs"]
        elif name == "dag-processor":
            argv = [AIRFLOW, "dag-processor"]
        else:
            raise ValueError(name)
        return ["nice", "-n", str(OTHERS_NICENESS), *argv]

    def start_component(self, name: str, extra_env: dict[str, str] | None = None) -> Component:
        comp = self.components.get(name) or Component(
            name, self._argv(name), self.home / "logs" / f"{name}.log"
        )
        self.components[name] = comp
        comp.start(
            {**self.env, **self.component_env.get(name.split("-")[0], {}), **(extra_env or {})}, self.home
        )
        return comp

    def start(self, triggerers: int = 1, timeout: float = 240) -> None:
        """Every component at once but the triggerers, which start one after another (each is told from the
        others by the TriggererJob row it adds); returns when all report healthy. Nothing waits on the API
        server at start (it writes the login file the REST client reads: ``wait_up`` before any call)."""
        for name in ["api-server", "scheduler", "dag-processor"]:
            self.start_component(name)
        for i in range(1, triggerers + 1):
            self.start_triggerer(f"triggerer-{i}", timeout)
        self.rest.wait_up(timeout, self.check_alive)
        self.wait_healthy(timeout)
        self.warm_execution_api()

    def warm_execution_api(self) -> None:
        """The api-server sets up its task execution API on the first request to it (2.7 s on 2 cores), and
        every task that starts meanwhile waits behind that request (a night's first 8 tasks did); a
        deployment that has been up a while has paid it, so the bed pays it here, before anything runs."""
        httpx.get(f"http://127.0.0.1:{self.api_port}/execution/health", timeout=120).raise_for_status()

    def start_triggerer(self, name: str, timeout: float = 240) -> int:
        """Start (or restart) a triggerer; returns the id of its new TriggererJob row."""
        before = set(self.triggerer_job_ids())
        comp = self.start_component(name)
        assert comp.pid is not None
        sampler = LoopThreadSampler(comp.pid)

        def new_job() -> int | None:
            self.check_alive()
            ids = set(self.triggerer_job_ids(running=True)) - before
            return max(ids) if ids else None

        try:
            job_id = int(wait_until(f"{name}'s TriggererJob row", new_job, timeout=timeout))
        except BaseException:
            sampler.stop()
            raise
        self.loop_samplers[job_id] = sampler
        self.triggerer_jobs[name] = job_id
        self.triggerer_job_history.setdefault(name, []).append(job_id)
        return job_id

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        self.components[name].kill(sig)

    def check_alive(self) -> None:
        """Raise with its log's tail when a component died that nobody killed."""
        for comp in self.components.values():
            if comp.proc is not None and not comp.killed and comp.proc.poll() is not None:
                raise RuntimeError(f"{comp.name} exited {comp.proc.returncode}:\n{tail(comp.log_path, 80)}")

    def wait_healthy(self, timeout: float = 240) -> None:
        def healthy() -> bool:
            self.check_alive()
            health = self.rest.health()
            return all(
                (health.get(part) or {}).get("status") == "healthy"
                for part in ("metadatabase", "scheduler", "triggerer", "dag_processor")
            )

        wait_until("every component healthy (/api/v2/monitor/health)", healthy, timeout=timeout, interval=1)

    def stop(self, grace: float = 5) -> None:
        """SIGTERM to every component at once, then each one's ``grace`` (SIGKILL after it)."""
        stopping = [(c, c.begin_stop()) for c in reversed(list(self.components.values()))]
        for comp, children in stopping:
            comp.finish_stop(children, grace)
        for sampler in self.loop_samplers.values():
            sampler.stop()

    # --- database ---
    def sql(self, query: str, *args: Any) -> list[tuple[Any, ...]]:
        return self.postgres.sql(self.database, query, *args) or []

    def triggerer_job_ids(self, running: bool = False) -> list[int]:
        where = " AND state = 'running'" if running else ""
        return [r[0] for r in self.sql(f"SELECT id FROM job WHERE job_type = 'TriggererJob'{where}")]

    def trigger_assignment(self, dag_id: str) -> dict[int | None, int]:
        """How many of the DAG's deferred task instances each TriggererJob id runs (None: not assigned)."""
        rows = self.sql(
            "SELECT t.triggerer_id, count(*) FROM trigger t JOIN task_instance ti ON ti.trigger_id = t.id"
            " WHERE ti.dag_id = %s AND ti.state = 'deferred' GROUP BY t.triggerer_id",
            dag_id,
        )
        return {r[0]: int(r[1]) for r in rows}

    # --- DAGs and logs ---
    def write_dag(self, dag_id: str, source: str) -> Path:
        path = self.home / "dags" / f"{dag_id}.py"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(source)
        tmp.rename(path)  # never a half-written file for the DAG processor
        return path

    def logs(self, prefix: str) -> str:
        return "".join(c.log() for n, c in self.components.items() if n.startswith(prefix))

    def executor_events(self, dag_id: str, task_id: str) -> int:
        """How many executor events (one per exit of a worker process, a deferral included) the scheduler has
        taken in for the task: a trigger that fires before the last one is in meets Airflow 3.3's
        "state mismatch" race (scenarios.state_mismatch_kills)."""
        key = f"TaskInstanceKey(dag_id='{dag_id}', task_id='{task_id}'"
        return sum(
            1
            for line in self.logs("scheduler").splitlines()
            if "Received executor event" in line and key in line
        )

    def blocked_thread_lines(self) -> list[str]:
        """The triggerers' "async thread was blocked for N seconds" warnings, as logged."""
        return [line for line in self.logs("triggerer").splitlines() if BLOCKED_THREAD in line]

    def blocked_thread_stalls(self) -> dict[int, list[LoopStall]]:
        """TriggererJob id -> each "async thread was blocked" warning its process logged, with what its loop
        thread did meanwhile (see loop_sampler)."""
        stalls: dict[int, list[LoopStall]] = {}
        for name, job_ids in self.triggerer_job_history.items():
            sections = self.components[name].log().split(START_MARKER)[1:]  # one per start, in order
            for job_id, section in zip(job_ids, sections, strict=False):  # a start may lack its job
                sampler = self.loop_samplers.get(job_id)
                stalls[job_id] = [
                    LoopStall.from_line(line, sampler)
                    for line in section.splitlines()
                    if BLOCKED_THREAD in line
                ]
        return stalls

    def first_trigger_starts(self, dag_id: str) -> dict[int, datetime]:
        """TriggererJob id -> when it started its first trigger of ``dag_id`` (the trigger logs, one file per
        task try and triggerer: ``attempt=N.log.trigger.<job id>.log``)."""
        first: dict[int, datetime] = {}
        for path in (self.home / "logs" / f"dag_id={dag_id}").rglob("*.log.trigger.*.log"):
            job_id = int(path.name.rsplit(".", 2)[-2])
            for line in path.read_text(errors="replace").splitlines():
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if str(entry.get("event", "")).endswith(" starting"):
                    when = datetime.fromisoformat(str(entry["timestamp"]).replace("Z", "+00:00"))
                    first[job_id] = min(first.get(job_id, when), when)
        return first

    def log_tails(self, lines: int = 60) -> str:
        parts = [
            f"----- {n} ({c.log_path}) -----\n{tail(c.log_path, lines)}" for n, c in self.components.items()
        ]
        parts.append(f"----- postgres ({self.postgres.log_path}) -----\n{self.postgres.log_tail(20)}")
        return "\n".join(parts)

    def write_env_file(self) -> Path:
        """``source``-able settings for a shell: the Airflow ones, KUBECONFIG, and the venv's bin first on
        PATH (``airflow`` is not on a fresh shell's PATH)."""
        path = self.home / "env"
        keys = sorted(k for k in self.env if k.startswith("AIRFLOW") or k in ("KUBECONFIG",))
        lines = [f"export {k}={_shell_quote(self.env[k])}\n" for k in keys]
        lines.append(f'export PATH={_shell_quote(str(Path(AIRFLOW).parent))}:"$PATH"\n')
        path.write_text("".join(lines))
        return path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def rest(self) -> RestClient:
        if self._rest is None:
            self._rest = RestClient(self.url, self.home / "simple_auth_manager_passwords.json.generated")
        return self._rest


def _shell_quote(value: str) -> str:
    return "'" + value.replace("'", "'\"'\"'") + "'"


# --- REST ---------------------------------------------------------------------------------------------------
@dataclass
class RestClient:
    """The public REST API (``/api/v2``) as the admin of the simple auth manager."""

    url: str
    passwords_file: Path
    _token: str | None = None
    _client: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=30))

    def wait_up(self, timeout: float, check: Any = None) -> None:
        def up() -> bool:
            if check:
                check()
            try:
                ok = self._client.get(f"{self.url}/api/v2/version", timeout=5).status_code == 200
            except httpx.HTTPError:
                return False
            return ok and self.passwords_file.exists()

        wait_until(f"API server at {self.url}", up, timeout=timeout, interval=1)

    def login(self) -> str:
        user, password = next(iter(json.loads(self.passwords_file.read_text()).items()))
        answer = self._client.post(f"{self.url}/auth/token", json={"username": user, "password": password})
        answer.raise_for_status()
        self._token = str(answer.json()["access_token"])
        return self._token

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        for attempt in range(5):
            if self._token is None:
                self.login()
            try:
                answer = self._client.request(
                    method, f"{self.url}{path}", headers={"Authorization": f"Bearer {self._token}"}, **kwargs
                )
            except httpx.TransportError:
                if attempt == 4:
                    raise
                time.sleep(2)  # a busy API server: ask again
                continue
            if answer.status_code == 401:
                self._token = None
                continue
            if answer.status_code >= 500 and attempt < 4:
                time.sleep(2)
                continue
            answer.raise_for_status()
            return answer.json() if answer.content else None
        raise RuntimeError(f"{method} {path}: still unauthorized after a fresh login")

    def health(self) -> dict[str, Any]:
        try:
            return dict(self._client.get(f"{self.url}/api/v2/monitor/health", timeout=10).json())
        except (httpx.HTTPError, ValueError):
            return {}

    def dag(self, dag_id: str) -> dict[str, Any] | None:
        try:
            return dict(self.request("GET", f"/api/v2/dags/{dag_id}"))
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code == 404:
                return None
            raise

    def wait_for_dag(self, dag_id: str, timeout: float = 180) -> dict[str, Any]:
        """Until the DAG processor has parsed the file and the DAG is active."""
        return dict(
            wait_until(
                f"DAG {dag_id} parsed",
                lambda: (d := self.dag(dag_id)) and d.get("is_stale") is not True and d,
                timeout=timeout,
                interval=1,
            )
        )

    def trigger(self, dag_id: str, conf: dict[str, Any] | None = None) -> str:
        run = self.request(
            "POST", f"/api/v2/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": conf or {}}
        )
        return str(run["dag_run_id"])

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return dict(self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}"))

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """Every task instance of the run, each mapped index its own."""
        out: list[dict[str, Any]] = []
        while True:
            page = self.request(
                "GET",
                f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances",
                params={"limit": 100, "offset": len(out), "order_by": "map_index"},
            )
            out += page["task_instances"]
            if not page["task_instances"] or len(out) >= page["total_entries"]:
                return out

    def xcom(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> Any:
        entry = self.request(
            "GET",
            f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/return_value",
            params={"map_index": map_index, "deserialize": True},
        )
        return entry["value"]

    def states(self, dag_id: str, run_id: str) -> dict[str, int]:
        counts: dict[str, int] = {}
        for ti in self.task_instances(dag_id, run_id):
            counts[str(ti["state"])] = counts.get(str(ti["state"]), 0) + 1
        return counts

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float, check: Any = None) -> dict[str, Any]:
        """Until the run ends (success or failed); ``check`` is called on each look (e.g. processes alive)."""

        def ended() -> dict[str, Any] | None:
            if check:
                check()
            run = self.dag_run(dag_id, run_id)
            return run if run["state"] in ("success", "failed") else None

        return dict(wait_until(f"run {dag_id}/{run_id} to end", ended, timeout=timeout, interval=2))


# --- a bed that outlives this process (make airflow-up / airflow-down) -------------------------------------
def _state_dir() -> Path:
    return Path(os.environ.get("DEVCLUSTER_STATE", REPO / ".devcluster")) / "airflow"


def _cluster_env() -> dict[str, str]:
    import shlex

    env_file = Path(os.environ.get("DEVCLUSTER_STATE", REPO / ".devcluster")) / "env"
    env: dict[str, str] = {}
    for line in env_file.read_text().splitlines():
        if line.startswith("export "):
            key, _, value = line[len("export ") :].partition("=")
            env[key] = shlex.split(value)[0] if value else ""
    return env


def bed_connections(cluster_env: dict[str, str]) -> dict[str, str]:
    """``kueue_blob_default`` on the bed's Azurite (the checkpoints' default connection), as the tests make
    it; none when the cluster has no Azurite."""
    conn_string = cluster_env.get("AZURE_STORAGE_CONNECTION_STRING")
    if not conn_string:
        return {}
    blob = {"conn_type": "wasb", "extra": {"connection_string": conn_string}}
    return {"AIRFLOW_CONN_KUEUE_BLOB_DEFAULT": json.dumps(blob)}


def _cli_up(triggerers: int, port: int, dags: str | None) -> None:
    state = _state_dir()
    if (state / "state.json").exists():
        _cli_down()
    bin_dir = postgres_bin()
    if bin_dir is None:
        sys.exit("PostgreSQL server binaries not found: apt-get install postgresql (or set POSTGRES_BIN)")
    cluster_env = _cluster_env()
    template = migrated_template(bin_dir, {**os.environ, **cluster_env})
    pg = Postgres.new_base(bin_dir)
    pg.copy_data_from(template)
    pg.start()
    home = state / "home"
    shutil.rmtree(home, ignore_errors=True)
    config = {"core.dags_are_paused_at_creation": "True"}  # a scheduled DAG would run (and fail) at once
    if dags:
        config["core.dags_folder"] = str(Path(dags).resolve())
    deployment = AirflowDeployment.create(home, pg, TEMPLATE_DB, cluster_env, config=config, api_port=port)
    deployment.env.update(bed_connections(cluster_env))
    deployment.write_env_file()
    saved: dict[str, Any] = {
        "postgres": {"pid": pg.proc.pid if pg.proc else None, "base": str(pg.base), "port": pg.port}
    }
    try:
        deployment.start(triggerers=triggerers)
    except BaseException:
        print(deployment.log_tails(), file=sys.stderr)
        deployment.stop()
        pg.stop()
        raise
    saved["components"] = {
        n: {"pid": c.pid, "log": str(c.log_path)} for n, c in deployment.components.items()
    }
    saved["url"] = deployment.url
    saved["home"] = str(home)
    (state / "state.json").write_text(json.dumps(saved, indent=2))
    user, password = next(iter(json.loads(deployment.rest.passwords_file.read_text()).items()))
    print(f"Airflow {deployment.url}  (user {user}, password {password})")
    print(f"components: {', '.join(deployment.components)}; logs in {home / 'logs'}")
    print(f"DAG folder: {deployment.env['AIRFLOW__CORE__DAGS_FOLDER']}")
    print(f"CLI: source {home / 'env'} && airflow dags list")
    print("DAGs start paused: airflow dags unpause <dag_id> (or the toggle in the UI), then trigger it")


def _cli_down() -> None:
    path = _state_dir() / "state.json"
    if not path.exists():
        print("no Airflow deployment running")
        return
    saved = json.loads(path.read_text())
    for name, info in reversed(list(saved.get("components", {}).items())):
        Component(name, [], Path(info["log"]), pid=info["pid"]).stop()
    pg = saved["postgres"]
    if pg.get("pid"):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pg["pid"], signal.SIGINT)
        with contextlib.suppress(TimeoutError):
            wait_until("postgres stopped", lambda: not Path(f"/proc/{pg['pid']}").exists(), 30, 0.2)
    shutil.rmtree(pg["base"], ignore_errors=True)
    path.unlink()
    print("Airflow deployment stopped")


def _cli_status() -> None:
    path = _state_dir() / "state.json"
    if not path.exists():
        print("no Airflow deployment running")
        return
    saved = json.loads(path.read_text())
    for name, info in saved["components"].items():
        comp = Component(name, [], Path(info["log"]), pid=info["pid"])
        print(f"{name:16} {info['pid']:>8}  {'running' if comp.alive() else 'DEAD'}  {info['log']}")
    try:
        health = httpx.get(f"{saved['url']}/api/v2/monitor/health", timeout=10).json()
        print(json.dumps(health, indent=1))
    except httpx.HTTPError as exc:
        print(f"API server not answering: {exc}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.integration.deployment", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start PostgreSQL and the Airflow components (replaces a running one)")
    up.add_argument("--triggerers", type=int, default=1)
    up.add_argument("--port", type=int, default=28080, help="API server port (default 28080)")
    up.add_argument("--dags", help="the DAG folder (default: dags/ in the AIRFLOW_HOME), e.g. example_dags")
    sub.add_parser("down")
    sub.add_parser("status")
    args = parser.parse_args(argv)
    if args.cmd == "up":
        _cli_up(args.triggerers, args.port, args.dags)
    elif args.cmd == "down":
        _cli_down()
    else:
        _cli_status()


if __name__ == "__main__":
    main()
