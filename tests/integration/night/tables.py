"""The night's report as Markdown: one column per system, then where the time goes (pure)."""

from __future__ import annotations

from typing import Any

from .workload import Night

TIME_PARTS = (
    ("scheduler", "waiting for the scheduler, and a pool slot (upstream end -> task start)"),
    ("submit", "the task's start -> its Job created"),
    ("kueue_queue", "queued in Kueue (created -> quota reserved)"),
    ("admitted_not_running", "admitted, not running (-> first pod Running)"),
    ("running", "running (first pod Running -> Job complete)"),
    ("resume", "resume (Job complete -> task end)"),
    ("detection", "... the trigger's event (Job complete -> event; resume guard included)"),
    ("after_event", "... after the event (-> task end: scheduler, worker start, execute_complete)"),
)


def _v(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "**no**"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def render_markdown(night: Night, rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    s = night.shape
    lines = [
        f"# One night: {s.samples} samples x {'/'.join(str(st.shards) for st in s.steps)} shards + "
        f"{s.risk_shards} risk shards, {meta.get('when', '')}",
        "",
        f"Time compression {s.compression:g}x (a 600 s shard runs {600 / s.compression:g} s). "
        "Quota: genomics "
        f"{s.genomics_cpu} CPU Spot, risk {s.risk_cpu} CPU on-demand, one cohort. {night.shards():,} shards, "
        f"{night.genomics_shard_seconds() + night.risk_shard_seconds():,.0f} shard-seconds (compressed). "
        f"Spot evictions: {s.spot_evictions_per_hour:.0%} of the pool's {night.spot_nodes} nodes per hour "
        f"(one every {night.eviction_interval():.0f} s compressed), "
        f"a new node {night.replacement_seconds():.0f} s "
        f"later. Genomics Jobs: parallelism {s.parallelism or '= shards'}"
        f"{f', partial admission at {s.min_parallelism_share:.0%}' if s.min_parallelism_share else ''}, "
        f"steps' priorities {s.step_order}"
        f"{'; ours packs shards, about a minute a pod' if s.pack_shards else ''}"
        f"{'; ours with the whole-Job backoffLimit' if s.whole_job_backoff else ''}. "
        f"Machine: {meta.get('machine', '')}; commit {meta.get('commit', '')}; wall time "
        f"{meta.get('wall_minutes', '')} min.",
        "",
        "| | " + " | ".join(r["system"] for r in rows) + " |",
        "|---|" + "---:|" * len(rows),
    ]

    def row(label: str, get: Any) -> None:
        lines.append(f"| {label} | " + " | ".join(_v(get(r)) for r in rows) + " |")

    row("makespan (s)", lambda r: r["makespan_s"])
    row(
        "ideal (s): max(quota bound, critical path)",
        lambda r: f"{r['ideal_s']:.0f} ({r['quota_bound_s']:.0f}, {r['critical_path_s']:.0f})",
    )
    row("makespan / ideal", lambda r: f"{r['ratio_to_ideal']:.2f}x")
    row(f"deadline met ({night.deadline_seconds()} s, every gather task)", lambda r: r["deadline_met"])
    row(
        "task states at the end", lambda r: ", ".join(f"{k} {v}" for k, v in sorted(r["task_states"].items()))
    )
    row("shards lost", lambda r: r["shards_lost"])
    row("shards completed twice", lambda r: r["completed_twice"])
    row(
        "indexes finished by two pods (an evicted or uncounted one and its replacement)",
        lambda r: r.get("finished_by_two_pods"),
    )
    row("Spot evictions", lambda r: r["spot_evictions"])
    row("shard-seconds redone per Spot eviction", lambda r: r["redone_per_eviction"])
    row("shard-seconds redone, other (preemption)", lambda r: r["redone_shard_seconds_other"])
    row(
        "shards a stopped pod left, taken over by a running pod of its Job",
        lambda r: r.get("shards_handed_off"),
    )
    row(
        "evicted pods that ended Succeeded, their rest finished by their Job's other pods in their grace",
        lambda r: r.get("grace_exits"),
    )
    row(
        "a disrupted pod's index: its next pod created after, median / sum (s)",
        lambda r: f"{_v(r.get('replacement_wait_median'))} / {_v(r.get('replacement_wait_sum'))}",
    )
    row("Jobs / pods", lambda r: f"{r['jobs']:,} / {r['pods']:,}")
    row("quota used, cohort (% of nominal)", lambda r: r["quota_utilisation_pct"].get("cohort"))
    row("apiserver requests, Airflow's workers and triggerers", lambda r: r["apiserver_requests_airflow"])
    row("... per shard", lambda r: r["airflow_requests_per_shard"])
    row(
        "apiserver requests, the UI probe's reads (own identity)",
        lambda r: "counted above" if r.get("apiserver_requests_ui") is None else r["apiserver_requests_ui"],
    )
    row("apiserver requests, every client", lambda r: r["apiserver_requests_total"])
    row("PostgreSQL commits", lambda r: r["postgres_commits"])
    row(
        "Blob requests, Airflow's: total / peak per second",
        lambda r: f"{r['blob']['airflow_requests']:,} / {r['blob']['airflow_peak_per_second']}",
    )
    row(
        "Blob requests per second at the peak, the shards' (model)",
        lambda r: r["blob"]["shards_peak_per_second_model"],
    )
    row("triggerer CPU, mean of the two (% of a core)", lambda r: r["triggerer_cpu_pct_mean"])
    row(
        "triggerer RSS peak (MB)",
        lambda r: "/".join(str(v["rss_peak_mb"]) for _, v in sorted(r["triggerer"].items())),
    )
    row("scheduler CPU (% of a core)", lambda r: (r["scheduler"] or {}).get("cpu_pct_of_core"))
    row(
        "UI reads at the peak: p50 / p99 / max (ms)",
        lambda r: (
            f"{r['ui']['p50_ms']} / {r['ui']['p99_ms']} / {r['ui']['max_ms']} "
            f"({r['ui']['reads']} reads, {r['ui']['errors']} not 200)"
        ),
    )
    row(
        "cost per sample, model: Spot / all on-demand (USD)",
        lambda r: f"{r['cost']['per_sample_usd']:.2f} / {r['cost']['per_sample_all_on_demand_usd']:.2f}",
    )
    row(
        "triggerer-1 killed / back (s into the night)",
        lambda r: ", ".join(f"{k} {v:.0f}" for k, v in (r.get("triggerer_kill") or {}).items()) or "no",
    )
    lines += ["", "## Where the time goes (seconds, over every task: sum / median / p90)", ""]
    lines += ["| part | " + " | ".join(r["system"] for r in rows) + " |", "|---|" + "---:|" * len(rows)]
    for key, label in TIME_PARTS:
        cells = []
        for r in rows:
            t = r["time"].get(key)
            cells.append(f"{t['sum']:,.0f} / {t['median']:.1f} / {t['p90']:.1f}" if t else "n/a")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += _requests_by_part(rows)
    lines.append("")
    return "\n".join(lines)


def _requests_by_part(rows: list[dict[str, Any]]) -> list[str]:
    """Airflow's apiserver requests by resource and verb (the bed's breakdown FlowSchemas), most first."""
    by = {r["system"]: r.get("apiserver_requests_airflow_by") or {} for r in rows}
    parts = sorted(
        {p for counts in by.values() for p in counts}, key=lambda p: -max(c.get(p, 0) for c in by.values())
    )
    if not parts:
        return []
    lines = ["", "## Airflow's apiserver requests by resource and verb", ""]
    lines += ["| resource.verb | " + " | ".join(by) + " |", "|---|" + "---:|" * len(by)]
    lines += [f"| {p} | " + " | ".join(f"{c.get(p, 0):,}" for c in by.values()) + " |" for p in parts]
    return lines
