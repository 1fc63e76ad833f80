"""Airflow DAG: one batch job through batchlake, fanned out with dynamic task
mapping and keyed on batchlake's exit codes (README "Exit codes"). It runs on
Airflow 2.x (2.5 or later) and 3.x.

plan -> submit (a sensor: pokes while it exits 75) -> status (a sensor: pokes
while 75) -> collect, one mapped task per shard -> reconcile --partition k/n,
one mapped task per partition -> reconcile --merge -> retry, when the report's
retry_records > 0 (after exit 10, and after exit 11 too) -> this DAG again for
the child job (conf {"job": <child job key>}); beside it, on exit 11, an alert
task that fails (the DAG run ends failed, for a person to review the unknown or
duplicate ids) without holding back the retry.

Every step prints one JSON object on stdout and is idempotent and write-once
in the lake, so Airflow may retry any task; a shard or partition that runs
twice writes nothing new. Exit 2 (usage or bad input) is never retried: the
task fails at once (AirflowFailException) for a person to fix the input.

Trigger with params (docs/deploy.md): lake, input (a path the worker reads),
tenant, prompt_version, provider, model, partitions; or {"job": <job key>} and
the lake for a planned job (a retry's child). The worker needs the binary on
PATH, the lake's credentials (for s3://, the AWS chain: environment or role)
and the provider's keys in its environment; each step's process is given
only its own provider's keys (PROVIDER_ENV).
"""
import json
import os
import subprocess

import pendulum
from airflow.exceptions import AirflowFailException, AirflowSkipException

try:  # Airflow 3: the Task SDK
    from airflow.sdk import Param, dag, task
except ImportError:  # Airflow 2.x
    from airflow.decorators import dag, task
    from airflow.models.param import Param
try:  # Airflow 3 (and 2.x with the standard provider installed)
    from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
except ImportError:  # Airflow 2.x
    from airflow.operators.trigger_dagrun import TriggerDagRunOperator

# The environment each provider's steps read (`submit --help`): a
# provider step gets its own provider's variables and no other's; the other
# steps get none. Bedrock's AWS credentials are the AWS chain's, as the lake's.
PROVIDER_ENV = {
    "sim": [],
    "openai": ["OPENAI_API_KEY", "OPENAI_BASE_URL"],
    "anthropic": ["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"],
    "gemini": ["GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"],
    "bedrock": ["BATCHLAKE_BEDROCK_REGION", "BATCHLAKE_BEDROCK_ENDPOINT", "BATCHLAKE_BEDROCK_ROLE_ARN",
                "BATCHLAKE_BEDROCK_INPUT", "BATCHLAKE_BEDROCK_OUTPUT"],
}


def step_env(environ: dict, provider: str = "") -> dict:
    """The environment of one step's process: the worker's, without any
    provider's variables but those of provider ("" for a step that talks to
    no provider). An unknown provider is an error, never "no keys"."""
    if provider and provider not in PROVIDER_ENV:
        raise ValueError(f"provider {provider!r}: want one of {', '.join(sorted(PROVIDER_ENV))}")
    keep = set(PROVIDER_ENV[provider]) if provider else set()
    drop = {k for names in PROVIDER_ENV.values() for k in names} - keep
    return {k: v for k, v in environ.items() if k not in drop}


def step_outcome(returncode: int) -> str:
    """What a step other than the merge does with batchlake's exit code
    (README "Exit codes"). Pure (no Airflow), so it can be tested on its own.

    "done": 0. "wait": 75, not yet (a lease held, a batch still running): a
    sensor pokes again, a task is retried. "fail": 2, usage or bad input: the
    task fails without a retry, for a person. "retry": 1 or any other code, an
    error Airflow's retries may clear (10 and 11 come only from the merge).
    """
    if returncode == 0:
        return "done"
    if returncode == 75:
        return "wait"
    if returncode == 2:
        return "fail"
    return "retry"


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


def missing_params(params: dict) -> list:
    """The params a run needs and lacks: the lake always (every task reads it;
    empty, it would be ./lake on the worker), and for a new job (no job) the
    input, tenant and prompt version."""
    need = ["lake"] if params.get("job") else ["lake", "input", "tenant", "prompt_version"]
    return [k for k in need if not params.get(k)]


class NotYet(Exception):
    """Exit 75 in a task (not a sensor): Airflow retries the task."""


def batchlake(args: list, provider: str = "", sensor: bool = False):
    """Runs the binary with args; returns its parsed JSON stdout on exit 0.

    The exit code decides (step_outcome): 75 is False for a sensor (poke
    again) and NotYet for a task (retried); 2 raises AirflowFailException,
    which fails the task without a retry whatever its retries; any other code
    raises RuntimeError, which Airflow retries.
    """
    p = subprocess.run(["batchlake", *args], capture_output=True, text=True,
                       env=step_env(dict(os.environ), provider))
    outcome = step_outcome(p.returncode)
    if outcome == "done":
        return json.loads(p.stdout)
    if outcome == "wait":
        if sensor:
            return False
        raise NotYet(f"batchlake {args[0]}: not yet (exit 75): {p.stderr.strip()}")
    if outcome == "fail":
        raise AirflowFailException(f"batchlake {args[0]}: exit 2, usage or bad input: {p.stderr.strip()}")
    raise RuntimeError(f"batchlake {args[0]}: exit {p.returncode}: {p.stderr.strip()}")


@dag(schedule=None, start_date=pendulum.datetime(2026, 1, 1), catchup=False,
     params={
         "lake": Param("", type="string", description="lake URL, e.g. s3://bucket/lake?region=eu-west-1"),
         "input": Param("", type="string", description="provider-format input JSONL, a path the worker reads"),
         "tenant": Param("", type="string"),
         "prompt_version": Param("v1", type="string"),
         "provider": Param("openai", enum=sorted(PROVIDER_ENV)),
         "model": Param("", type="string", description="the job's model where input lines name none (bedrock, gemini)"),
         "job": Param("", type="string", description="a planned job's key (a retry's child): plan is skipped"),
         # a child's run gets it from a rendered conf, as a string
         "partitions": Param(4, type=["integer", "string"], description="reconcile partitions"),
         "max_in_flight": Param(0, type=["integer", "string"], description="the job's batches unfinished at the provider at once (0: no limit; docs/backfill.md)"),
         "parallel": Param(1, type=["integer", "string"], description="shards submit works on at a time, their uploads side by side (docs/submission.md)"),
     })
def batchlake_job():
    @task(retries=3)
    def plan(params=None) -> str:
        """The job key: planned from params.input, or params.job as given."""
        missing = missing_params(params)
        if missing:
            raise AirflowFailException(f"set the DAG run's params {', '.join(missing)}")
        if params["job"]:
            return params["job"]
        return batchlake(["plan", "--lake", params["lake"], "--provider", params["provider"], "--model", params["model"],
                          "--input", params["input"], "--tenant", params["tenant"],
                          "--prompt-version", params["prompt_version"], "--log-format", "json"])["job_key"]

    job = plan()

    # submit exits 75 while a shard is not bound yet (lease held, create
    # outcome unknown, or waiting for room under max_in_flight): poke again.
    @task.sensor(poke_interval=300, timeout=60 * 60 * 48, mode="reschedule", retries=3)
    def submit(j: str, params=None) -> bool:
        return batchlake(["submit", "--lake", params["lake"], "--job", j, "--provider", params["provider"],
                          "--max-in-flight", str(params.get("max_in_flight", 0)),
                          "--parallel", str(params.get("parallel", 1)),
                          "--log-format", "json"], provider=params["provider"], sensor=True) is not False

    # The sensor pokes status: exit 0 when every shard is terminal, 75 while not.
    @task.sensor(poke_interval=300, timeout=60 * 60 * 48, mode="reschedule", retries=3)
    def status(j: str, params=None) -> bool:
        return batchlake(["status", "--lake", params["lake"], "--job", j, "--provider", params["provider"],
                          "--log-format", "json"], provider=params["provider"], sensor=True) is not False

    @task(retries=3)
    def shards(j: str, params=None) -> list:
        rows = batchlake(["sql", "--lake", params["lake"], "--format", "json", "--log-format", "json",
                          f"SELECT shard_id FROM shards WHERE job_key = '{j}' ORDER BY shard_id"])
        return [r["shard_id"] for r in rows]

    # One mapped task per shard; 75 (batch not terminal yet) and 1 are retried.
    @task(retries=5, retry_delay=pendulum.duration(minutes=1), retry_exponential_backoff=True)
    def collect(j: str, shard: str, params=None) -> None:
        batchlake(["collect", "--lake", params["lake"], "--job", j, "--shard", shard, "--provider", params["provider"],
                   "--log-format", "json"], provider=params["provider"])

    @task
    def partitions(params=None) -> list:
        n = int(params["partitions"])
        return [f"{k}/{n}" for k in range(n)]

    # One mapped task per partition: records split by the hash of their custom_id (docs/engines.md).
    # Every partition and the merge take the same reconcile flags.
    @task(retries=3)
    def reconcile_partition(j: str, part: str, params=None) -> None:
        batchlake(["reconcile", "--lake", params["lake"], "--job", j, "--partition", part,
                   "--max-attempts", "3", "--log-format", "json"])

    @task(retries=3)
    def merge(j: str, params=None) -> dict:
        p = subprocess.run(["batchlake", "reconcile", "--lake", params["lake"], "--job", j, "--merge",
                            "--partitions", str(params["partitions"]), "--max-attempts", "3", "--log-format", "json"],
                           capture_output=True, text=True, env=step_env(dict(os.environ)))
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

    @task(retries=3)
    def retry(d: dict, params=None) -> str:
        if not d["retry"]:
            raise AirflowSkipException("nothing to retry")
        return batchlake(["retry", "--lake", params["lake"], "--job", d["job"], "--log-format", "json"])["child"]["job_key"]

    submitted = submit(job)
    waited = status(job)
    shard_ids = shards(job)
    collected = collect.partial(j=job).expand(shard=shard_ids)
    parts = reconcile_partition.partial(j=job).expand(part=partitions())
    merged = merge(job)
    child = retry(merged)
    alert(merged)
    # The child is a new job: run this DAG again for it (skipped with retry).
    next_round = TriggerDagRunOperator(
        task_id="next_round", trigger_dag_id="batchlake_job",
        conf={"job": "{{ ti.xcom_pull(task_ids='retry') }}", "lake": "{{ params.lake }}",
              "provider": "{{ params.provider }}", "partitions": "{{ params.partitions }}"})
    submitted >> waited >> shard_ids >> collected >> parts >> merged >> child >> next_round


batchlake_job()
