"""Airflow DAG: one batch job through batchlake, fanned out with dynamic task
mapping and keyed on batchlake's exit codes (README "Exit codes").

plan -> submit (re-run while it exits 75) -> status (sensor: poke while 75)
-> collect, one mapped task per shard -> reconcile --partition k/n, one mapped
task per partition -> reconcile --merge -> retry, when the report's
retry_records > 0 (after exit 10, and after exit 11 too) -> this DAG again for
the child job (conf {"job": <child job key>}); beside it, on exit 11, an alert
task that fails (the DAG run ends failed, for a person to review the unknown or
duplicate ids) without holding back the retry.

Every step prints one JSON object on stdout and is idempotent and write-once
in the lake, so Airflow may retry any task; a shard or partition that runs
twice writes nothing new. Trigger with conf {"input": ..., "tenant": ...} for
a new job, or {"job": <job key>} for a planned one (a retry's child).
"""
import json
import subprocess

import pendulum
from airflow.decorators import dag, task
from airflow.exceptions import AirflowFailException, AirflowSkipException
from airflow.models import Variable
from airflow.operators.bash import BashOperator
from airflow.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sensors.bash import BashSensor

# Jinja, for templated fields (bash_command): the lake and the job planned by this run.
LAKE = "{{ var.value.batchlake_lake }}"
JOB = "{{ ti.xcom_pull(task_ids='plan') }}"
PROVIDER = "openai"
COLLECT = f"batchlake collect --lake {LAKE} --job {JOB} --provider {PROVIDER} --log-format json --shard "


def lake() -> str:
    """The lake URL, for Python tasks (Jinja renders only templated fields)."""
    return Variable.get("batchlake_lake")


def after_merge(returncode: int, stdout: str) -> dict:
    """What the round does after batchlake reconcile --merge (README "Exit codes").

    Pure (no Airflow), so it can be tested on its own. Returns
    {"retry": run retry and the child's round, "alert": fail the alert task,
    "rerun": run the merge again (Airflow retries), "fail": a person fixes input}.
    The retry follows the report's retry_records, never the exit code alone:
    exit 11 wins over 10, and its retry shard must not be lost.
    """
    decision = {"retry": False, "alert": False, "rerun": False, "fail": False}
    if returncode in (0, 10, 11):
        report = json.loads(stdout)
        if not isinstance(report.get("retry_records"), int):
            raise ValueError("batchlake reconcile: the report has no retry_records")
        decision["retry"] = report["retry_records"] > 0
        decision["alert"] = returncode == 11
    elif returncode == 2:
        decision["fail"] = True  # a partition missing or made with other flags
    else:
        decision["rerun"] = True  # 1 or 75
    return decision


@dag(schedule=None, start_date=pendulum.datetime(2026, 1, 1), catchup=False,
     params={"input": "", "tenant": "", "prompt_version": "v1", "job": "", "partitions": 4})
def batchlake_job():
    @task
    def plan(params=None) -> str:
        """The job key: planned from params.input, or params.job as given."""
        if params["job"]:
            return params["job"]
        p = subprocess.run(["batchlake", "plan", "--lake", lake(), "--provider", PROVIDER, "--input", params["input"],
                            "--tenant", params["tenant"], "--prompt-version", params["prompt_version"],
                            "--log-format", "json"], capture_output=True, text=True)
        if p.returncode == 2:
            raise AirflowFailException(p.stderr)  # bad input: a person fixes it, no retry
        if p.returncode != 0:
            raise RuntimeError(p.stderr)
        return json.loads(p.stdout)["job_key"]

    job = plan()

    # submit exits 75 while a shard is not bound yet: retry the task.
    submit = BashOperator(
        task_id="submit", retries=20, retry_delay=pendulum.duration(minutes=1), retry_exponential_backoff=True,
        bash_command=f"batchlake submit --lake {LAKE} --job {JOB} --provider {PROVIDER} --log-format json")

    # The sensor pokes status: exit 0 when every shard is terminal, 75 while
    # not; any other code fails the sensor.
    status = BashSensor(
        task_id="status", poke_interval=300, timeout=60 * 60 * 48, mode="reschedule", retry_exit_code=75,
        bash_command=f"batchlake status --lake {LAKE} --job {JOB} --provider {PROVIDER} --log-format json")

    @task
    def shards(j: str) -> list[str]:
        out = subprocess.run(["batchlake", "sql", "--lake", lake(), "--format", "json", "--log-format", "json",
                              f"SELECT shard_id FROM shards WHERE job_key = '{j}' ORDER BY shard_id"],
                             capture_output=True, text=True, check=True).stdout
        return [r["shard_id"] for r in json.loads(out)]

    shard_ids = shards(job)

    # One mapped task per shard; 75 (batch not terminal yet) and 1 are retried.
    collect = BashOperator.partial(
        task_id="collect", retries=5, retry_delay=pendulum.duration(minutes=1),
    ).expand(bash_command=shard_ids.map(lambda s: COLLECT + s))

    @task(retries=3)
    def partitions(params=None) -> list[str]:
        n = int(params["partitions"])
        return [f"{k}/{n}" for k in range(n)]

    # One mapped task per partition: records split by record_id (docs/engines.md).
    # Every partition and the merge take the same reconcile flags.
    @task(retries=3)
    def reconcile_partition(j: str, part: str) -> None:
        p = subprocess.run(["batchlake", "reconcile", "--lake", lake(), "--job", j, "--partition", part,
                            "--max-attempts", "3", "--log-format", "json"], capture_output=True, text=True)
        if p.returncode == 2:
            raise AirflowFailException(p.stderr)
        if p.returncode != 0:
            raise RuntimeError(p.stderr)

    parts = reconcile_partition.partial(j=job).expand(part=partitions())

    @task(retries=3)
    def merge(j: str, params=None) -> dict:
        p = subprocess.run(["batchlake", "reconcile", "--lake", lake(), "--job", j, "--merge",
                            "--partitions", str(params["partitions"]), "--max-attempts", "3", "--log-format", "json"],
                           capture_output=True, text=True)
        d = after_merge(p.returncode, p.stdout)
        if d["fail"]:
            raise AirflowFailException(p.stderr)
        if d["rerun"]:
            raise RuntimeError(p.stderr)  # Airflow retries
        d["job"], d["report"] = j, json.loads(p.stdout).get("report", "")
        return d

    # Exit 11: the task fails, so the DAG run ends failed and Airflow's failure
    # notifications (email, on_failure_callback) reach a person. Nothing depends
    # on it: the retry below runs all the same.
    @task
    def alert(d: dict) -> None:
        if not d["alert"]:
            raise AirflowSkipException("no unknown or duplicate ids")
        raise AirflowFailException(f"batchlake: job {d['job']} has unknown or duplicate ids: review "
                                   f"(report {d['report']}); its retry shard is retried all the same")

    @task
    def retry(d: dict) -> str:
        if not d["retry"]:
            raise AirflowSkipException("nothing to retry")
        out = subprocess.run(["batchlake", "retry", "--lake", lake(), "--job", d["job"], "--log-format", "json"],
                             capture_output=True, text=True, check=True).stdout
        return json.loads(out)["child"]["job_key"]

    merged = merge(job)
    child = retry(merged)
    alert(merged)
    # The child is a new job: run this DAG again for it (skipped with retry).
    next_round = TriggerDagRunOperator(
        task_id="next_round", trigger_dag_id="batchlake_job",
        conf={"job": "{{ ti.xcom_pull(task_ids='retry') }}", "partitions": "{{ params.partitions }}"})
    job >> submit >> status >> shard_ids >> collect >> parts >> merged >> child >> next_round


batchlake_job()
