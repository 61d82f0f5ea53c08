"""`gpuflow submit`, `gpuflow watch` and `gpuflow topics`: a user's view of the streams."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaException, TopicPartition
from rich.console import Console
from rich.table import Table

from gpuflow.commands.common import fail, running_config, tenant_signer, worker_url
from gpuflow.dryrun import PlanError, plan_lines, request_plan
from gpuflow.render import LINES, decision_line
from infra.config import Config
from infra.jobspec import JobSpecError, job_record, load_job_file
from infra.kafka import consumer, producer, topic_offsets
from infra.topics import DECISIONS_PLACEMENT, JOBS_SUBMITTED, TOPICS
from schemas import DecodeError, make_codec

__all__ = ["submit", "topics", "watch"]

_WATCHABLE = {t.name.rsplit(".", 1)[-1]: t.name for t in TOPICS}


def _assign_all(c: Any, topic: str, offset: int) -> None:
    meta = c.list_topics(topic, timeout=10).topics.get(topic)
    if meta is None or not meta.partitions:
        raise fail(f"topic {topic} does not exist on this broker")
    c.assign([TopicPartition(topic, p, offset) for p in meta.partitions])


def _spec_from(job_file: Path | None, flags: dict[str, Any]) -> dict[str, Any]:
    spec = load_job_file(job_file) if job_file else {}
    spec.update({k: v for k, v in flags.items() if v is not None})
    return job_record(spec)


_JOB_FILE_SUFFIXES = (".yaml", ".yml", ".json")


def _split_args(args: list[str]) -> tuple[Path | None, list[str]]:
    """`[JOB_FILE] [-- COMMAND...]`: the first argument is the job file when it ends in
    .yaml/.yml/.json; everything else is the command to run."""
    if args and Path(args[0]).suffix in _JOB_FILE_SUFFIXES:
        return Path(args[0]), args[1:]
    return None, args


def _signal_flag(text: str | None) -> dict[str, Any]:
    """Slurm's `--signal SIG[@SECONDS]`: the checkpoint signal and, after @, its grace."""
    if text is None:
        return {}
    sig, _, grace = text.partition("@")
    out: dict[str, Any] = {"checkpoint_signal": sig}
    if grace:
        out["checkpoint_grace_s"] = grace
    return out


def submit(
    args: Annotated[
        list[str] | None,
        typer.Argument(
            help="[JOB_FILE] [-- COMMAND...]: a job spec YAML and/or the command to run.",
            show_default=False,
        ),
    ] = None,
    job_id: Annotated[str | None, typer.Option(help="Job id (default: generated).")] = None,
    gpus: Annotated[int | None, typer.Option(help="GPUs in the gang.")] = None,
    gpu_milli: Annotated[int | None, typer.Option(help="Share of one GPU, 1..1000.")] = None,
    gpu_model: Annotated[list[str] | None, typer.Option(help="Allowed GPU model.")] = None,
    region: Annotated[list[str] | None, typer.Option(help="Allowed region.")] = None,
    zone: Annotated[
        list[str] | None, typer.Option(help="Allowed zone: ZONE or REGION/ZONE (repeat).")
    ] = None,
    kind: Annotated[str | None, typer.Option(help="TRAINING, INFERENCE, BATCH, NOTEBOOK.")] = None,
    precision: Annotated[str | None, typer.Option(help="FP32 TF32 BF16 FP16 FP8 INT8.")] = None,
    params_b: Annotated[float | None, typer.Option(help="Model parameters, billions.")] = None,
    priority: Annotated[int | None, typer.Option(help="Higher runs first.")] = None,
    priority_class: Annotated[
        str | None,
        typer.Option(
            help="online-inference, urgent-training, batch, best-effort (or the policy's)."
        ),
    ] = None,
    tenant: Annotated[str | None, typer.Option(help="Team the job's quota counts against.")] = None,
    duration: Annotated[float | None, typer.Option(help="Expected run time, s.")] = None,
    family: Annotated[str | None, typer.Option(help="Model family (llama, bert...).")] = None,
    tensor_parallel: Annotated[int | None, typer.Option(help="Tensor-parallel degree.")] = None,
    pipeline_parallel: Annotated[int | None, typer.Option(help="Pipeline degree.")] = None,
    finetune: Annotated[str | None, typer.Option(help="FULL, LORA or QLORA.")] = None,
    sharding: Annotated[str | None, typer.Option(help="NONE, ZERO1/2/3, FSDP.")] = None,
    optimizer: Annotated[str | None, typer.Option(help="ADAM, ADAM_8BIT or SGD.")] = None,
    offload: Annotated[
        bool | None, typer.Option("--offload/--no-offload", help="Optimizer in host memory.")
    ] = None,
    micro_batch: Annotated[int | None, typer.Option(help="Micro-batch (serving: batch).")] = None,
    seq_len: Annotated[int | None, typer.Option(help="Sequence / context length.")] = None,
    checkpointing: Annotated[
        bool | None, typer.Option("--checkpointing/--no-checkpointing", help="Recompute.")
    ] = None,
    stack: Annotated[str | None, typer.Option(help="Built for: cuda-12.1, rocm-6.0...")] = None,
    command: Annotated[
        str | None, typer.Option(help="Command to run, split as a shell would (or after --).")
    ] = None,
    env: Annotated[list[str] | None, typer.Option(help="K=V for the job's environment.")] = None,
    workdir: Annotated[str | None, typer.Option(help="Working directory on the node.")] = None,
    time_limit: Annotated[
        str | None,
        typer.Option(help="Run at most: seconds, 30m, 2h, or Slurm's MM:SS, HH:MM:SS, D-HH:MM:SS."),
    ] = None,
    retries: Annotated[int | None, typer.Option(help="Re-runs after a non-zero exit.")] = None,
    image: Annotated[str | None, typer.Option(help="Container image (needs a runtime).")] = None,
    signal: Annotated[
        str | None,
        typer.Option(help="Checkpoint signal before a stop, SIG[@GRACE_S] (default USR1)."),
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the decision.")] = 60.0,
    data_dir: Annotated[Path, typer.Option(help="Where `gpuflow up` runs.")] = Path("gpuflow-data"),
    as_json: Annotated[bool, typer.Option("--json", help="Print the decision as JSON.")] = False,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Send nothing: show where it would go and why not there."),
    ] = False,
) -> None:
    """Submit one job and print its decision (or, with --dry-run, where it would go)."""
    flags = {
        "job_id": job_id,
        "gpu_count": gpus,
        "gpu_milli": gpu_milli,
        "allowed_gpu_models": gpu_model or None,
        "allowed_regions": region or None,
        "allowed_zones": zone or None,
        "kind": kind,
        "precision": precision,
        "params_b": params_b,
        "priority": priority,
        "priority_class": priority_class,
        "tenant": tenant,
        "expected_duration_s": duration,
        "model_family": family,
        "tensor_parallel": tensor_parallel,
        "pipeline_parallel": pipeline_parallel,
        "finetune": finetune,
        "sharding": sharding,
        "optimizer": optimizer,
        "optimizer_offload": offload,
        "micro_batch": micro_batch,
        "seq_len": seq_len,
        "activation_checkpointing": checkpointing,
        "software_stack": stack,
        "env": env or None,
        "workdir": workdir,
        "time_limit_s": time_limit,
        "retries": retries,
        "image": image,
        **_signal_flag(signal),
    }
    job_file, argv = _split_args(list(args or []))
    if argv and command:
        raise fail("bad job spec: command: give --command or a command after --, not both")
    flags["command"] = argv or command
    try:
        record = _spec_from(job_file, flags)
    except JobSpecError as exc:
        raise fail(f"bad job spec: {exc}") from None
    config = running_config(data_dir)
    if dry_run:
        _dry_run(config, record, as_json)
        return
    record = _signed(config, record)
    decision = _submit_and_wait(config, record, timeout)
    if decision is None:
        raise fail(f"no final decision for {record['job_id']} within {timeout:.0f}s")
    if as_json:
        typer.echo(json.dumps(decision, default=str))
    else:
        Console().print(decision_line(decision), highlight=False, soft_wrap=True)
    if decision["outcome"] == "REJECTED":
        raise typer.Exit(1)


def _signed(config: Config, record: dict[str, Any]) -> dict[str, Any]:
    """The record signed with the configured tenant key (`[auth]`, GPUFLOW_AUTH_*), if any."""
    key = tenant_signer(config)
    if key is None:
        return record
    claimed = record.get("tenant")
    if claimed not in (None, "default", key.key.tenant):
        owner = key.key.tenant
        raise fail(f"bad job spec: tenant: {claimed!r}, but the signing key is {owner!r}'s")
    return key.sign(record)


def _dry_run(config: Config, record: dict[str, Any], as_json: bool) -> None:
    """Ask the worker's /plan/ page; no event is produced."""
    try:
        plan = request_plan(worker_url(config), record)
    except PlanError as exc:
        raise fail(str(exc)) from None
    if as_json:
        typer.echo(json.dumps(plan, default=str))
        return
    console = Console()
    for line in plan_lines(plan, str(record.get("precision", "FP32"))):
        console.print(line, highlight=False, soft_wrap=True)
    if plan.get("outcome") == "REJECTED":
        raise typer.Exit(1)


def _submit_and_wait(config: Config, record: dict[str, Any], timeout: float) -> dict | None:
    codec = make_codec(config.kafka.schema_registry_url or None)
    c = consumer(config.kafka, group_id=f"gpuflow-submit-{record['job_id']}")
    try:
        _assign_all(c, DECISIONS_PLACEMENT, OFFSET_END)
        c.consume(1, timeout=0.5)  # settles the assignment at the end before we produce
        p = producer(config.kafka)
        p.produce(
            JOBS_SUBMITTED,
            key=record["job_id"].encode(),
            value=codec.encode("JobSubmitted", record, topic=JOBS_SUBMITTED),
        )
        p.flush(10)
        deadline = time.monotonic() + timeout
        queued: dict | None = None
        while time.monotonic() < deadline:
            for msg in c.consume(100, timeout=0.2):
                if msg.error() or msg.key() != record["job_id"].encode():
                    continue
                _, decision = codec.decode(msg.value())
                if decision["outcome"] != "QUEUED":
                    return decision
                queued = decision
        return queued
    except KafkaException as exc:
        raise fail(f"broker error: {exc}") from None
    finally:
        c.close()


def watch(
    kind: Annotated[
        str,
        typer.Argument(
            help="placement, preemption, migration, advisory, bandwidth, "
            "deadletter, ... (a topic's last name part)"
        ),
    ] = "placement",
    from_beginning: Annotated[bool, typer.Option(help="Replay the topic first.")] = False,
    count: Annotated[int | None, typer.Option(help="Stop after this many events.")] = None,
    timeout: Annotated[float | None, typer.Option(help="Stop after this many seconds.")] = None,
    data_dir: Annotated[Path, typer.Option(help="Where `gpuflow up` runs.")] = Path("gpuflow-data"),
) -> None:
    """Tail a decision (or any gpuflow) topic, one decoded event per line."""
    topic = _WATCHABLE.get(kind) or (kind if kind in _WATCHABLE.values() else None)
    if topic is None:
        raise fail(f"unknown topic {kind!r}; one of: {', '.join(sorted(_WATCHABLE))}")
    config = running_config(data_dir)
    codec = make_codec(config.kafka.schema_registry_url or None)
    console = Console()
    c = consumer(config.kafka, group_id=f"gpuflow-watch-{time.monotonic_ns()}")
    seen, started = 0, time.monotonic()
    try:
        _assign_all(c, topic, OFFSET_BEGINNING if from_beginning else OFFSET_END)
        while (count is None or seen < count) and (
            timeout is None or time.monotonic() - started < timeout
        ):
            for msg in c.consume(100, timeout=0.2):
                if msg.error():
                    continue
                seen += 1
                console.print(_line(codec, msg.value()), highlight=False, soft_wrap=True)
    except KeyboardInterrupt:
        pass
    finally:
        c.close()


def _line(codec: Any, value: bytes | None) -> str:
    try:
        name, record = codec.decode(value)
    except DecodeError as exc:
        return f"[red]undecodable[/red] {exc}"
    line = LINES.get(name)
    if line is not None:
        return line(record)
    return f"[cyan]{name}[/cyan] " + json.dumps(record, default=lambda b: b.hex()[:64])


def topics(
    data_dir: Annotated[Path, typer.Option(help="Where `gpuflow up` runs.")] = Path("gpuflow-data"),
) -> None:
    """List gpuflow's topics with their message counts."""
    config = running_config(data_dir)
    counts = topic_offsets(config.kafka, [t.name for t in TOPICS])
    table = Table("topic", "event", "messages", "compacted", title=config.kafka.bootstrap_servers)
    for spec in TOPICS:
        n = counts.get(spec.name)
        table.add_row(
            spec.name, spec.event, "-" if n is None else f"{n:,}", "yes" if spec.compacted else ""
        )
    Console().print(table)
