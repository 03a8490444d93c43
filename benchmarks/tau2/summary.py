"""Tables of the harness's headline figures, from the per-trajectory records."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def _group(report: dict[str, Any], **labels: str) -> dict[str, Any] | None:
    for g in report.get("groups", []):
        if all(g["labels"].get(k) == v for k, v in labels.items()):
            return g
    return None


def _fmt(x: Any) -> str:
    return "-" if x is None else f"{x:.3f}" if isinstance(x, float) else str(x)


def ground_truth_table(records: list[dict[str, Any]], report: dict[str, Any]) -> list[str]:
    rows = [
        "| domain | context | tasks | calls | env-rejected calls | of which blocked before "
        "execution | false positives | TER | mean FED | AUC-PEC | reach gold DB (Y) "
        "| RR (eligible) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    by: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r["kind"] == "ground_truth":
            by[(r["domain"], r["context"])].append(r)
    for (domain, context), rs in sorted(by.items()):
        g = _group(report, domain=domain, variant="ground_truth", context=context) or {}
        rows.append(
            f"| {domain} | {context} | {len(rs)} | {sum(r['T'] for r in rs)} "
            f"| {sum(len(r['env_rejected_steps']) for r in rs)} "
            f"| {sum(len(r['caught_before_execution']) for r in rs)} "
            f"| {sum(len(r['false_positives']) for r in rs)} "
            f"| {_fmt(g.get('ter'))} | {_fmt(g.get('mean_fed'))} | {_fmt(g.get('auc_pec'))} "
            f"| {sum(r['reaches_gold_state'] for r in rs)}/{len(rs)} "
            f"| {_fmt(g.get('rr'))} ({_fmt(g.get('rr_eligible'))}) |"
        )
    return rows


VERDICTS = (
    "guard_before_execution",
    "environment_only",
    "flagged_later",
    "silent",
    "no_db_effect",
)


def injection_table(records: Iterable[dict[str, Any]]) -> list[str]:
    rows = [
        "| domain | class | n | replay: rejected / silent / no DB effect | guard before "
        "execution | environment only | flagged later | missed: silent | missed: no DB effect "
        "| FED agrees | cause agrees |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    by: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r["kind"] == "injection":
            by[(r["domain"], r["class"])].append(r)
    for (domain, cls), rs in sorted(by.items()):
        outcomes = Counter(r["replay_outcome"] for r in rs)
        verdicts = Counter(r["verdict"] for r in rs)
        rows.append(
            f"| {domain} | {cls} | {len(rs)} "
            f"| {outcomes['env_rejected']} / {outcomes['silent']} / {outcomes['no_db_effect']} "
            + "".join(f"| {verdicts[v]} " for v in VERDICTS)
            + f"| {sum(r['fed_agrees'] for r in rs)}/{len(rs)} "
            f"| {sum(r['cause_agrees'] for r in rs)}/{len(rs)} |"
        )
    return rows


def disagreements(records: Iterable[dict[str, Any]]) -> list[str]:
    """Why FED or cause differ from the replay, counted by (class, guard check, expected)."""
    seen: Counter[tuple[str, str, str, str]] = Counter()
    for r in records:
        if r["kind"] == "injection" and not r["cause_agrees"]:
            key = (
                r["class"],
                str(r["guard_check"]),
                str(r["true_cause"]),
                str(r["replay_message"])[:70],
            )
            seen[key] += 1
    return [
        f"- {n} x {cls}: guard `{check}`, expected {cause} (tau2: `{msg}`)"
        for (cls, check, cause, msg), n in seen.most_common()
    ]


def message_reading(records: Iterable[dict[str, Any]]) -> list[str]:
    """Where tau2's message alone would name another cause than the guard's (by design:
    a reference is checked before the state)."""
    seen: Counter[tuple[str, str, str]] = Counter()
    for r in records:
        env = r.get("replay_message_cause")
        if r["kind"] == "injection" and env and r["guard_cause"] != env:
            seen[(r["class"], str(r["guard_cause"]), env)] += 1
    return [
        f"- {n} x {cls}: guard {g}, tau2's message reads as {e}"
        for (cls, g, e), n in seen.most_common()
    ]


def false_positive_lines(records: Iterable[dict[str, Any]]) -> list[str]:
    seen: Counter[tuple[str, str, str]] = Counter()
    for r in records:
        if r["kind"] == "ground_truth":
            for fp in r["false_positives"]:
                seen[(r["context"], r["domain"], str(fp["check"]))] += 1
    return [f"- context={c} {d}: {n} x `{check}`" for (c, d, check), n in sorted(seen.items())]


def write_summary(
    records: list[dict[str, Any]],
    report: dict[str, Any],
    path: Path,
    elapsed: float,
    argv: list[str] | None,
) -> str:
    lines = [
        "## tau2: ground truth",
        "",
        *ground_truth_table(records, report),
        "",
        "False positives by check:",
        *(false_positive_lines(records) or ["- none"]),
        "",
        "## tau2: wrong-id injection (context=account)",
        "",
        *injection_table(r for r in records if r["context"] == "account"),
        "",
        "Cause or FED disagreements:",
        *(disagreements(r for r in records if r["context"] == "account") or ["- none"]),
        "",
        "Guard cause vs the cause tau2's error message alone suggests:",
        *(message_reading(r for r in records if r["context"] == "account") or ["- none"]),
        "",
        f"{len(records)} trajectories in {elapsed:.0f} s; warnings from the report: "
        f"{len(report.get('warnings', []))}",
    ]
    text = "\n".join(lines) + "\n"
    path.write_text(text)
    return text
