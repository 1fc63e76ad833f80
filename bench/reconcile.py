#!/usr/bin/env python3
"""bench/reconcile.py: a plain single-threaded Python reconciler, the
comparison a user would write first.

It is the reconcile pseudocode of an LLM batch job, done the straightforward
way: json.loads of every line of the three files (the expected requests, the
output file, the error file), dicts and sets, the set algebra and the counts,
nothing written. bench/run.sh runs it beside batchlake and checks its counts
against the generator's truth.json like every other result.

    python3 bench/reconcile.py input.jsonl output.jsonl errors.jsonl

prints one JSON object with the report's counts (the keys of truth.json).
The rules are those of the reconcile report (docs/contract.md) for OpenAI
batch files: a record's outcome is its best line by precedence succeeded >
quality_failed > failed_retryable > failed_permanent > missing; a 2xx answer
whose first choice has no content and no tool calls fails the quality gate;
HTTP 408, 429, 5xx and the transient error codes are retryable, every other
failure permanent; a line that is not JSON (or names no custom_id) is
quarantined.
"""
import json
import sys

RETRYABLE_CODES = {
    "batch_expired", "batch_cancelled", "rate_limit_exceeded", "server_error", "timeout",
    "overloaded", "overloaded_error", "api_error", "rate_limit_error", "timeout_error",
    "expired", "canceled", "internal_error", "service_unavailable",
}
PERMANENT_CODES = {"insufficient_quota", "billing_error"}

SUCCEEDED, QUALITY_FAILED, FAILED_RETRYABLE, FAILED_PERMANENT = 1, 2, 3, 4


def rank(row):
    """The outcome precedence of one result line (lower wins)."""
    response = row.get("response") or {}
    status = response.get("status_code")
    body = response.get("body") or {}
    if status is not None and 200 <= status < 300:
        choices = body.get("choices") or [{}]
        message = choices[0].get("message") or {}
        if message.get("content") or message.get("tool_calls"):
            return SUCCEEDED
        return QUALITY_FAILED
    error = row.get("error") or body.get("error") or {}
    code = error.get("code") or ""
    kind = error.get("type") or ""
    if code in PERMANENT_CODES:
        return FAILED_PERMANENT
    if status in (408, 429) or (status is not None and 500 <= status < 600) \
            or code in RETRYABLE_CODES or kind in RETRYABLE_CODES:
        return FAILED_RETRYABLE
    return FAILED_PERMANENT


def read_results(path, best, lines, quarantined):
    with open(path, "rb") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                cid = row["custom_id"]
            except (ValueError, KeyError, TypeError):
                quarantined.append(line)
                continue
            r = rank(row)
            lines[cid] = lines.get(cid, 0) + 1
            if r < best.get(cid, 99):
                best[cid] = r
    return quarantined


def main(argv):
    if len(argv) != 4:
        sys.exit("usage: reconcile.py input.jsonl output.jsonl errors.jsonl")
    expected = set()
    with open(argv[1], "rb") as f:
        for line in f:
            if line.strip():
                expected.add(json.loads(line)["custom_id"])
    best, lines, quarantined = {}, {}, []
    read_results(argv[2], best, lines, quarantined)
    read_results(argv[3], best, lines, quarantined)

    seen = set(lines)
    missing = expected - seen
    unknown = seen - expected
    duplicate = {cid for cid, n in lines.items() if n > 1 and cid in expected}
    outcome = {SUCCEEDED: 0, QUALITY_FAILED: 0, FAILED_RETRYABLE: 0, FAILED_PERMANENT: 0}
    for cid in expected & seen:
        outcome[best[cid]] += 1
    report = {
        "expected": len(expected),
        "succeeded": outcome[SUCCEEDED],
        "quality_failed": outcome[QUALITY_FAILED],
        "failed_retryable": outcome[FAILED_RETRYABLE],
        "failed_permanent": outcome[FAILED_PERMANENT],
        "missing": len(missing),
        "unknown": len(unknown),
        "duplicate": len(duplicate),
        "quarantined": len(quarantined),
        # Every record is in its first attempt, under any --max-attempts.
        "retry_records": len(missing) + outcome[FAILED_RETRYABLE] + outcome[QUALITY_FAILED],
        "closed": not missing and not unknown and not duplicate,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv)
