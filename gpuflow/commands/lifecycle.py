"""`gpuflow cancel` (scancel), `gpuflow jobs` (squeue) and `gpuflow status` (sacct).

Job state lives in the worker (its queue and reservation tables: `/jobs/` on its web port,
`streams.web.job_views`); the history of every epoch is ClickHouse's `job_epochs` view, read
through the worker's `/sql/` page like `gpuflow sql` (or the store directly when no worker
runs). A cancel is a CancelRequest on `gpuflow.jobs.cancel`, signed with the configured
tenant key when there is one (docs/jobs.md).
"""

from __future__ import annotations

import getpass
import json
import time
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from rich.console import Console
from rich.table import Table

from gpuflow.commands.common import fail, running_config, tenant_signer, worker_url
from gpuflow.commands.sql import run_query
from infra.config import Config
from infra.kafka import producer
from infra.store import StoreError
from infra.store.queries import JOB_EPOCHS
from infra.topics import JOBS_CANCEL
from schemas import make_codec
from schemas.registry import default_schemas

__all__ = ["cancel", "jobs", "status"]

ENDED = ("FINISHED", "FAILED", "TIMEOUT", "CANCELLED")
DataDir = Annotated[Path, typer.Option(help="Where `gpuflow up` runs.")]
Url = Annotated[str | None, typer.Option(help="Worker web address (default: the stack's).")]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def _get(base: str, params: dict[str, str]) -> tuple[int, dict[str, Any]]:
    try:
        resp = httpx.get(f"{base}/jobs/", params=params, timeout=10)
        return resp.status_code, resp.json()
    except (httpx.HTTPError, ValueError) as exc:
        why = f"no worker answering at {base}/jobs/ ({type(exc).__name__}): is it running?"
        raise fail(why) from None


def _base(config: Config | None, url: str | None) -> str:
    return (url or (worker_url(config) if config is not None else "")).rstrip("/")


def _job(base: str, job_id: str) -> dict[str, Any] | None:
    code, body = _get(base, {"job": job_id})
    return body.get("job") if code == 200 else None


def _age(ms: Any) -> str:
    if not ms:
        return "-"
    s = max(0, int(time.time() - int(ms) / 1000))
    return f"{s}s" if s < 120 else f"{s // 60}m" if s < 7200 else f"{s // 3600}h"


# ---- gpuflow cancel ---------------------------------------------------------------------------
def cancel(
    job_ids: Annotated[list[str], typer.Argument(help="The jobs to cancel.")],
    reason: Annotated[str, typer.Option(help="Why (kept in the job's history).")] = "",
    url: Url = None,
    data_dir: DataDir = Path("gpuflow-data"),
) -> None:
    """Cancel jobs: a queued job leaves the queue, a running one is stopped; its GPUs and
    quota come back. Only the job's tenant (or an admin key) may, once keys are configured."""
    config = running_config(data_dir)
    base = _base(config, url)
    sent = []
    for job_id in job_ids:
        row = _job(base, job_id)
        if row is None:
            typer.echo(f"{job_id}: unknown job (not waiting, running or recently ended)")
        elif row["state"] in ENDED:
            typer.echo(f"{job_id}: already {row['state']}; nothing to cancel")
        else:
            sent.append(_request(config, job_id, reason))
            typer.echo(f"{job_id}: cancel requested ({row['state']} in {row['region']})")
    if sent:
        _produce(config, sent)
    else:
        raise typer.Exit(1)


def _request(config: Config, job_id: str, reason: str) -> dict[str, Any]:
    now = int(time.time() * 1000)
    record = {
        "event_id": f"cancel:{job_id}:{now}", "ts": now, "job_id": job_id,
        "tenant": config.auth.tenant or "default", "reason": reason,
        "requested_by": getpass.getuser(), "key_id": "", "signature": "",
    }  # fmt: skip
    key = tenant_signer(config)
    if key is None:
        return record
    return key.sign(record, schema=default_schemas().get("CancelRequest"))


def _produce(config: Config, records: list[dict[str, Any]]) -> None:
    codec = make_codec(config.kafka.schema_registry_url or None)
    p = producer(config.kafka)
    for record in records:
        value = codec.encode("CancelRequest", record, topic=JOBS_CANCEL)
        p.produce(JOBS_CANCEL, key=record["job_id"].encode(), value=value)
    if p.flush(10):
        raise fail("the broker did not take the cancel requests within 10s")


# ---- gpuflow jobs -----------------------------------------------------------------------------
def jobs(
    tenant: Annotated[str, typer.Option(help="Only this tenant's jobs.")] = "",
    state: Annotated[
        str, typer.Option(help="Only these states, comma separated (PENDING,RUNNING,...).")
    ] = "",
    url: Url = None,
    as_json: AsJson = False,
    data_dir: DataDir = Path("gpuflow-data"),
) -> None:
    """Jobs waiting, running and recently ended: state, region, GPUs, since, why waiting."""
    base = _base(running_config(data_dir), url)
    code, view = _get(base, {"tenant": tenant, "state": state})
    if code != 200:
        raise fail(f"worker at {base} answered {code}")
    if as_json:
        typer.echo(json.dumps(view, indent=1))
        return
    table = Table(box=None, pad_edge=False)
    for name in ("JOBID", "TENANT", "STATE", "REGION", "GPUS", "SINCE", "EPOCH", "NODES", "WHY"):
        table.add_column(name, justify="right" if name in ("GPUS", "SINCE", "EPOCH") else "left")
    for j in view["jobs"]:
        why = f"{j['reason_code']}: {j['reason']}" if j["reason_code"] else j["reason"]
        table.add_row(j["job_id"], j["tenant"], j["state"], j["region"], f"{j['gpus']:g}",
                      _age(j["since"]), str(j["epoch"]), ",".join(j["nodes"]) or "-",
                      why)  # fmt: skip
    Console(width=200).print(table)
    if view.get("more"):
        typer.echo(f"... and {view['more']} more (--tenant, --state or --json)")


# ---- gpuflow status ---------------------------------------------------------------------------
def status(
    job_id: Annotated[str, typer.Argument(help="The job.")],
    url: Url = None,
    as_json: AsJson = False,
    data_dir: DataDir = Path("gpuflow-data"),
) -> None:
    """A job's whole history, like sacct: each epoch with node, GPUs, start, end, exit code,
    GPU-hours and moves; its current state and why it waits."""
    config = running_config(data_dir)
    base = _base(config, url)
    now = _job(base, job_id)
    try:
        res = run_query(config, JOB_EPOCHS, {"job": job_id}, base=base)
    except StoreError as exc:
        raise fail(f"history: {exc}") from None
    epochs = [dict(zip(res.columns, row, strict=True)) for row in res.rows]
    if now is None and not epochs:
        raise fail(f"{job_id}: unknown job (no state in the worker, no history)")
    if as_json:
        typer.echo(json.dumps({"job": now, "epochs": epochs}, indent=1, default=str))
        return
    console = Console(width=200)
    if now is not None:
        why = f"; waiting: {now['reason_code']}: {now['reason']}" if now["reason_code"] else ""
        console.print(f"{job_id}  {now['state']}  tenant {now['tenant']}  region "
                      f"{now['region'] or '-'}  {now['gpus']:g} GPUs  epoch {now['epoch']}  "
                      f"retries used {now['retries_used']}/{now['retries']}{why}",
                      highlight=False)  # fmt: skip
    console.print(_epochs_table(epochs))
    evicted = sum(1 for e in epochs if e["state"] == "EVICTED")
    moves = sum(int(e["moves"] or 0) for e in epochs)
    hours = sum(float(e["gpu_hours"] or 0) for e in epochs)
    console.print(f"epochs {len(epochs)}  preemptions {evicted}  moves {moves}  "
                  f"GPU-hours {hours:.4f}", highlight=False)  # fmt: skip


def _epochs_table(epochs: list[dict[str, Any]]) -> Table:
    table = Table(box=None, pad_edge=False)
    columns = ("EPOCH", "STATE", "REGION", "NODES", "GPUS", "START", "END", "EXIT", "CAUSE",
               "GPU-H", "MOVES")  # fmt: skip
    for name in columns:
        table.add_column(name)
    for e in epochs:
        code = "-" if e["exit_code"] is None else str(e["exit_code"])
        table.add_row(str(e["epoch"]), e["state"], e["region"] or "-", ",".join(e["nodes"]),
                      f"{float(e['gpus']):g}", _when(e["started"]), _when(e["ended"]), code,
                      e["cause"] or "-", f"{float(e['gpu_hours'] or 0):.4f}",
                      str(e["moves"] or 0))  # fmt: skip
    return table


def _when(value: Any) -> str:
    return "-" if not value else str(value).replace("T", " ")[:19]
