"""Proactive protection mechanism: telemetry -> node advisories, moves off a node, cordons.

The policy (`scorer.protection.NodeHealth`) watches each node's HBM bandwidth and ECC/XID
errors. Its actions become events here:
  CHECKPOINT -> a NodeAdvisory (CHECKPOINT) listing the jobs on the node: checkpoint now;
  CORDON     -> the node takes no new work (kept in its `nodes` table entry, so a restart
                keeps it), a NodeAdvisory (CORDON), and one MigrationDecision NODE_UNHEALTHY
                without a target per job on it: the executor checkpoints and stops the job,
                reports EVICTED, and the scheduler places it again elsewhere (next epoch);
  UNCORDON   -> the node takes work again, a NodeAdvisory (UNCORDON).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from infra.topics import DECISIONS_ADVISORY, DECISIONS_MIGRATION
from scorer.holds import HOLD_PREFIX as HOLD
from scorer.protection import EVACUATE, UNCORDON, NodeAction, NodeHealth, ProtectionPolicy
from streams.base.outbox import Outgoing, new_event_id, outgoing
from streams.scheduler.convert import assignment_records

if TYPE_CHECKING:
    from streams.scheduler.protocols import Booked
    from streams.telemetry.reports import Reports

__all__ = ["CORDON_KEY", "Protection"]

log = logging.getLogger(__name__)

CORDON_KEY = "cordon"  # in a node's `nodes` table entry: why it is cordoned


class Protection:
    """Per-node health windows of one worker and the events they lead to."""

    def __init__(self, scheduler: Booked, policy: ProtectionPolicy | None = None) -> None:
        self.s = scheduler
        self.health = NodeHealth(policy)

    def set_policy(self, policy: ProtectionPolicy) -> None:
        self.health.policy = policy

    def cordoned(self, node_id: str) -> bool:
        return bool((self.s.nodes.get(node_id) or {}).get(CORDON_KEY))

    def restore(self) -> None:
        """Cordons kept in the nodes table take effect again after a restart."""
        for node_id, record in self.s.nodes.items():
            if record.get(CORDON_KEY):
                self.health.restore_cordon(node_id, str(record[CORDON_KEY]), self.s.clock())
                self.s.state.set_node_healthy(node_id, False)

    def observe(self, reports: Reports) -> list[Outgoing]:
        """Each report's GPUs into its node's windows, in order; the events they lead to."""
        if not self.health.policy.enabled:
            return []
        index, bw, ecc = reports.index.tolist(), reports.bw.tolist(), reports.ecc.tolist()
        critical, clock = reports.critical.tolist(), self.s.clock
        out: list[Outgoing] = []
        for i, (start, end) in enumerate(reports.gpu_rows()):
            actions = self.health.observe_values(
                reports.node_id[i],
                int(reports.ts[i]) or clock(),
                index[start:end], bw[start:end], ecc[start:end], critical[start:end],
            )  # fmt: skip
            for action in actions:
                out.extend(self._act(action, reports.region[i]))
        return out

    def _act(self, action: NodeAction, region: str) -> list[Outgoing]:
        node_id = action.node_id
        jobs = self._jobs_on(node_id)
        log.warning(
            "protection action=%s node_id=%s reason=%s jobs=%d %s",
            action.action, node_id, action.reason, len(jobs), action.detail,
        )  # fmt: skip
        entry = dict(self.s.nodes.get(node_id) or {})
        moves: list[Outgoing] = []
        if action.action == EVACUATE:
            self.s.nodes[node_id] = {**entry, CORDON_KEY: action.reason}
            self.s.state.set_node_healthy(node_id, False)
            moves = [self._move(job_id, held, region, action) for job_id, held in jobs.items()]
        elif action.action == UNCORDON:
            entry.pop(CORDON_KEY, None)
            self.s.nodes[node_id] = entry
            self.s.state.set_node_healthy(node_id, True)
        return [self._advisory(action, region, sorted(jobs)), *moves]

    def _jobs_on(self, node_id: str) -> dict[str, Any]:
        return {
            job_id: held
            for job_id, held in self.s.state.jobs.items()
            if not job_id.startswith(HOLD) and any(a.node_id == node_id for a in held)
        }

    def _advisory(self, action: NodeAction, region: str, jobs: list[str]) -> Outgoing:
        ts = self.s.clock()
        record = {
            "event_id": new_event_id(action.node_id, action.action, str(ts)),
            "ts": ts,
            "node_id": action.node_id,
            "region": region,
            "action": action.action,
            "reason": action.reason,
            "job_ids": jobs,
            "value": float(action.value),
            "detail": action.detail,
        }
        return outgoing(
            DECISIONS_ADVISORY, action.node_id, record, region=region,
            partition_of=self.s.partition_of,
        )  # fmt: skip

    def _move(self, job_id: str, held: Any, region: str, action: NodeAction) -> Outgoing:
        epoch = self.s.epochs.get(job_id, 0)
        record = {
            "event_id": new_event_id(job_id, "evacuate", str(epoch), action.node_id),
            "ts": self.s.clock(),
            "job_id": job_id,
            "from_region": region,
            "from_assignments": assignment_records(held),
            "to_region": "",
            "to_assignments": [],
            "reason": "NODE_UNHEALTHY",
            "expected_gain": 0.0,
        }
        return outgoing(
            DECISIONS_MIGRATION, job_id, record, region=region, partition_of=self.s.partition_of
        )
