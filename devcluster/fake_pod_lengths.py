"""How long a fake pod runs: the jq expression the KWOK stages read a pod's run length from.

A test or benchmark that knows each *shard's* length (not each index's) annotates the pod template with
``kwok.airflow-kueue.io/shard-durations`` (seconds by shard id, ``"1.8,2.4,..."``), and the pod runs the sum
of the shards its index runs, found the way the worker SDK finds them: ``AIRFLOW_KUEUE_SHARDS`` (the Job's
shard ids, an interval string) and ``AIRFLOW_KUEUE_SHARDS_PER_POD`` (the pack shape: ``"3"``,
``"4x2,3x14"``, either with ``/`` and the shard ids in pack order). So the fake pods follow whatever packs the
operator chose (a stated duration's waves, the shard history's balanced packs, a retry's unfinished shards),
which an index-numbered table fixed when the DAG was written cannot. Without that annotation, the older
``run-duration-N`` (index N) and ``run-duration`` annotations apply.

``kwok.airflow-kueue.io/run-remaining`` on the pod itself (a Go duration) overrides them all: a bed that
stands in for the SDK's done records patches it on a replacement pod whose pack holds shards an evicted
predecessor finished, so the pod runs only the rest, as an SDK program that skips done shards would.
"""

from __future__ import annotations

SHARD_DURATIONS_ANNOTATION = "kwok.airflow-kueue.io/shard-durations"
RUN_REMAINING_ANNOTATION = "kwok.airflow-kueue.io/run-remaining"

RUN_DURATION_EXPRESSION = f"""
def ids: [split(",")[] | select(. != "") | split("-") | map(tonumber)
  | if length == 1 then .[0] else range(.[0]; .[1] + 1) end];
.metadata.annotations as $a
| ($a["{SHARD_DURATIONS_ANNOTATION}"] // "") as $d
| ($a["batch.kubernetes.io/job-completion-index"] // "") as $i
| if ($a["{RUN_REMAINING_ANNOTATION}"] // "") != "" then $a["{RUN_REMAINING_ANNOTATION}"]
  elif $d == "" or $i == "" then
    ($a["kwok.airflow-kueue.io/run-duration-" + $i] // $a["kwok.airflow-kueue.io/run-duration"])
  else
    ($d | split(",") | map(tonumber)) as $len
    | ([.spec.containers[0].env[]? | select(.name == "AIRFLOW_KUEUE_SHARDS") | .value] | .[0] // "") as $s
    | ([.spec.containers[0].env[]? | select(.name == "AIRFLOW_KUEUE_SHARDS_PER_POD") | .value] | .[0] // "1")
      as $shape
    | (if $s == "" then [range(0; $len | length)] else ($s | ids) end) as $shards
    | ($shape | split("/")) as $parts
    | (if ($parts | length) > 1 then ($parts[1] | ids) else $shards end) as $order
    | (if ($parts[0] | test("x")) then [$parts[0] | split(",")[] | split("x") | map(tonumber)]
       else ($parts[0] | tonumber) as $p
       | [[$p, (($shards | length) / $p | floor)], [($shards | length) % $p, 1]]
       | map(select(.[0] > 0 and .[1] > 0)) end) as $runs
    | (reduce $runs[] as $r ({{rank: 0, left: ($i | tonumber), first: null, size: 0}};
        if .first != null then .
        elif .left < $r[1] then .first = .rank + .left * $r[0] | .size = $r[0]
        else .rank += $r[0] * $r[1] | .left -= $r[1] end)) as $at
    | ([$order[$at.first:$at.first + $at.size][] | $len[.]] | add * 1000 | floor | tostring) + "ms"
  end
""".strip()
"""jq over a pod: its run length as a Go duration (``"5400ms"``), or null for the stage's 1 s default."""
