"""Decision lines: short, one line, the decisive reason first, surviving rich's markup."""

from __future__ import annotations

from rich.console import Console

from gpuflow.render import decision_line


def _text(markup: str) -> str:
    console = Console(width=400, record=True, color_system=None)
    console.print(markup, highlight=False, soft_wrap=True)
    return console.export_text().strip()


def test_rejected_line_shows_the_first_reason_briefly() -> None:
    decision = {
        "job_id": "j1",
        "outcome": "REJECTED",
        "region": "eu",
        "reasons": ["memory [needs 140 GiB]", "gpu_model: T4 is not an allowed GPU model"],
        "refusals": {"memory": 812, "gpu_model": 3010},
    }
    text = _text(decision_line(decision))
    assert text == "REJECTED j1                     in eu  memory [needs 140 GiB] (+1 more)"
    long = {**decision, "reasons": ["x" * 600]}
    line = _text(decision_line(long))
    # head (9 + 23) + "in eu  " + 160 characters: a 600-character reason is cut with "…"
    assert len(line) == 9 + 23 + len(" in eu  ") - 1 + 160 and line.endswith("…")


def test_placed_line_shows_where_and_why() -> None:
    decision = {
        "job_id": "j2",
        "outcome": "PLACED",
        "region": "us",
        "gpu_model": "H100",
        "gpu_count": 2,
        "score": 81.4,
        "score_breakdown": {"compute": 30.0, "cost": 22.0, "topology": 10.0, "x": 1.0},
        "assignments": [{"node_id": "n[1]", "gpu_indices": [0, 1], "gpu_milli": 1000}],
    }
    text = _text(decision_line(decision))
    assert "-> us H100x2 n[1][0,1]" in text
    assert "score 81 (compute 30, cost 22, topology 10)" in text
