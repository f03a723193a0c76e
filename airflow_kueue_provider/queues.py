"""``python -m airflow_kueue_provider.queues apply|check PATH...``: the queue declarations from a shell (CI,
a platform team's pipeline), with an Airflow kubernetes connection (``--conn-id``, default
``kubernetes_default``; ``AIRFLOW_CONN_<ID>`` works without a database). Exit 0: applied, or in sync; 1:
``check`` found something missing or drifted, or ``apply`` left objects whose declared fields other field
managers own (``--force`` takes them); 2: bad declarations."""

from __future__ import annotations

import argparse
import json
import sys

from .hooks.queue_declarations import apply_declarations, load_declarations, report
from .hooks.queue_setup_hook import KueueQueueSetupHook
from .kueue.queues.queue_setup import InvalidQueueDeclaration


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m airflow_kueue_provider.queues", description=__doc__)
    parser.add_argument("command", choices=("apply", "check"))
    parser.add_argument("paths", nargs="+", help="YAML files or directories of them")
    parser.add_argument("--force", action="store_true", help="take declared fields other managers own")
    parser.add_argument("--conn-id", default="kubernetes_default", help="Airflow kubernetes connection")
    args = parser.parse_args(argv)
    try:
        objects = load_declarations(args.paths)
    except InvalidQueueDeclaration as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    outcomes = apply_declarations(
        KueueQueueSetupHook(args.conn_id), objects, check_only=args.command == "check", force=args.force
    )
    for outcome in outcomes:
        print(f"{outcome.ref}: {outcome.action}")
        for line in outcome.drift:
            print(f"    {line}")
        for conflict in outcome.conflicts:
            print(f"    {conflict}" + (", taken (--force)" if outcome.action == "updated" else ", left"))
    print(json.dumps(report(outcomes)["counts"], sort_keys=True))
    return 1 if any(o.action in ("missing", "drifted", "conflict") for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
