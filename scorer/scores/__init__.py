"""Score plugins: soft preferences, one per file, each 0..100 per node."""

from __future__ import annotations

from scorer.scores.bin_pack import BinPackScore
from scorer.scores.carbon import CarbonScore
from scorer.scores.communication import CommunicationScore
from scorer.scores.compute import ComputeScore
from scorer.scores.cost import CostScore
from scorer.scores.data_affinity import DataAffinityScore
from scorer.scores.fgd import FgdScore
from scorer.scores.first_fit import FirstFitScore
from scorer.scores.fragmentation import FragmentationScore, TaskMix
from scorer.scores.load_balance import LoadBalanceScore
from scorer.scores.memory_fit import MemoryFitScore
from scorer.scores.model_pressure import ModelPressureScore
from scorer.scores.porting import PortingScore
from scorer.scores.topology import TopologyScore

__all__ = [
    "BinPackScore",
    "CarbonScore",
    "CommunicationScore",
    "ComputeScore",
    "CostScore",
    "DataAffinityScore",
    "FgdScore",
    "FirstFitScore",
    "FragmentationScore",
    "LoadBalanceScore",
    "MemoryFitScore",
    "ModelPressureScore",
    "PortingScore",
    "TaskMix",
    "TopologyScore",
]
