"""Airflow DAG: one batch job through batchlake, keyed on its exit codes.

plan -> submit (re-run while it exits 75) -> status (sensor: poke while 75)
-> collect -> reconcile (0 done, 10 retry, 11 alert) -> retry -> next round.
Dynamic task mapping runs one round per generation handed over by XCom
(every step prints one JSON object on stdout; plan's is pushed).
"""
import json

import pendulum
from airflow.decorators import dag, task
from airflow.exceptions import AirflowSkipException
from airflow.operators.bash import BashOperator
from airflow.sensors.bash import BashSensor

LAKE = "{{ var.value.batchlake_lake }}"
PROVIDER = "openai"


@dag(schedule=None, start_date=pendulum.datetime(2026, 1, 1), catchup=False,
     params={"input": "", "tenant": "", "prompt_version": "v1"})
def batchlake_job():
    plan = BashOperator(
        task_id="plan",
        bash_command=(
            f"batchlake plan --lake {LAKE} --provider openai --input {{{{ params.input }}}} "
            "--tenant {{ params.tenant }} --prompt-version {{ params.prompt_version }} --log-format json | jq -c ."
        ),
        do_xcom_push=True,
    )

    @task
    def job_key(out: str) -> list[str]:
        return [json.loads(out)["job_key"]]

    jobs = job_key(plan.output)

    # submit exits 75 while a shard is not bound yet: retry the task.
    submit = BashOperator.partial(
        task_id="submit", retries=20, retry_delay=pendulum.duration(minutes=1), retry_exponential_backoff=True,
    ).expand(bash_command=jobs.map(
        lambda j: f"batchlake submit --lake {LAKE} --job {j} --provider {PROVIDER} --log-format json"))

    # The sensor pokes status: exit 0 when every shard is terminal, 75 while not.
    status = BashSensor.partial(
        task_id="status", poke_interval=300, timeout=60 * 60 * 48, mode="reschedule",
    ).expand(bash_command=jobs.map(
        lambda j: f"batchlake status --lake {LAKE} --job {j} --provider {PROVIDER} --log-format json"))

    collect = BashOperator.partial(task_id="collect", retries=5).expand(bash_command=jobs.map(
        lambda j: f"batchlake collect --lake {LAKE} --job {j} --provider {PROVIDER} --log-format json"))

    @task
    def reconcile(j: str) -> str:
        import subprocess
        p = subprocess.run(["batchlake", "reconcile", "--lake", LAKE, "--job", j, "--max-attempts", "3",
                            "--log-format", "json"], capture_output=True, text=True)
        if p.returncode == 11:
            raise RuntimeError(f"batchlake: job {j} has unknown or duplicate ids: review")
        if p.returncode == 0:
            raise AirflowSkipException("job COMPLETED: nothing to retry")
        if p.returncode != 10:
            raise RuntimeError(p.stderr)
        return j

    @task
    def retry(j: str) -> str:
        import subprocess
        out = subprocess.run(["batchlake", "retry", "--lake", LAKE, "--job", j, "--log-format", "json"],
                             capture_output=True, text=True, check=True).stdout
        return json.loads(out)["child"]["job_key"]

    partial = reconcile.expand(j=jobs)
    children = retry.expand(j=partial)
    plan >> jobs >> submit >> status >> collect >> partial >> children
    # The children are new jobs: trigger this DAG's round again for them
    # (TriggerDagRunOperator with the child job key) or run `batchlake run`.


batchlake_job()
