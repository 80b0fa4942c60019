"""The probe's outcome written out: probe.json (canonical bytes) and probe.md (the knob table as
knobs-and-arms.md prints it, then every difference, the phase-1 checks, every arm attempt, the
disclosures and the provenance).
"""

from __future__ import annotations

from pathlib import Path

from poisson_tasks.bundle import canonical_json
from poisson_tasks.probe.figures import KnobStatusRow, ProbeResult
from poisson_tasks.supplied import markdown, markdown_code

RESULT_JSON = "probe.json"
RESULT_MD = "probe.md"


def result_json(result: ProbeResult) -> bytes:
    """probe.json: canonical bytes (sorted keys, no spaces), one trailing newline."""
    return canonical_json(result.model_dump(mode="json")) + b"\n"


def _cell_text(result: ProbeResult, row: KnobStatusRow, model: str) -> str:
    for cell in row.cells:
        if cell.model == model:
            return cell.text
    for gap in result.unmeasured:
        if gap.model == model and gap.knob == row.knob:
            return f"not measured: {gap.reason}"
    return "not measured"


def _cell_code(value: str) -> str:
    """A supplied value as a code span inside a table cell: GFM reads a cell's `\\|` as a pipe,
    even in a code span, so no value can open a cell."""
    return markdown_code(value).replace("|", "\\|")


def render_probe(result: ProbeResult) -> str:
    """probe.md: the knob table as knobs-and-arms.md prints it, then every difference, the
    phase-1 checks, every arm attempt, the disclosures and the provenance."""
    out: list[str] = []
    title = "Reference-policy knob probe" if result.reference_policies else "Knob probe"
    out.append(f"# {title}: {result.name}")
    out.append("")
    if result.reference_policies:
        out.append(
            "The models here are the project's reference policies (scripted baselines served "
            "over HTTP), not language models: these figures test the probe, they describe no "
            "model."
        )
        out.append("")
    out.append(
        f"Measured on this build by `poisson-tasks probe`, {result.tasks} tasks x "
        f"{result.attempts} attempts per arm, {result.metric}; every figure below is computed "
        "from the records in this folder (`poisson-tasks probe --from DIR` rebuilds this file "
        f"byte for byte). Registration hash {result.registration_hash}."
    )
    out.append("")
    out.append("| knob | shipped | " + " | ".join(result.models) + " |")
    out.append("|---|---|" + "---|" * len(result.models))
    for row in result.rows:
        cells = " | ".join(_cell_text(result, row, m) for m in result.models)
        out.append(f"| {row.knob} | {'yes' if row.shipped else 'no'} | {cells} |")
    out.append("")
    out.append(f"How a verdict is read: {result.rule}")
    out.append("")
    out.append("## Contrasts")
    out.append("")
    out.append("| model | knob | contrast | arms | pass@1 | difference [interval] | tasks |")
    out.append("|---|---|---|---|---|---|---|")
    for difference in result.contrasts:
        out.append(
            f"| {difference.model} | {difference.knob} | {difference.name} | "
            f"{difference.minuend} − {difference.subtrahend} | "
            f"{difference.minuend_pass:.3f} − {difference.subtrahend_pass:.3f} | "
            f"{difference.figure.text} | {difference.pairs} |"
        )
    out.append("")
    out.append("## Arm attempts")
    out.append("")
    out.append("| model | arm | folder | episodes | scored | instrument rate | void | used |")
    out.append("|---|---|---|---|---|---|---|---|")
    for attempt in result.arm_runs:
        out.append(
            f"| {attempt.model} | {attempt.arm} | {markdown(attempt.folder)} | {attempt.episodes} | "
            f"{attempt.scored}/{attempt.planned} | "
            f"{attempt.instrument_rate:.3f} | {'yes' if attempt.void else 'no'} | "
            f"{'yes' if attempt.used else 'no (kept)'} |"
        )
    out.append("")
    out.append("## Disclosures")
    out.append("")
    # sentences that quote what a user chose (a rerun's --cause, a folder): each printed as text
    out.extend(f"{i}. {markdown(text)}" for i, text in enumerate(result.disclosures, start=1))
    out.append("")
    out.append("## Provenance")
    out.append("")
    out.append(
        "| model | phase | folder | served model | episodes | sessions | pre-registration | "
        "generator | engine | records sha256 |"
    )
    out.append("|---|---|---|---|---|---|---|---|---|---|")
    for provenance in result.provenance:
        out.append(
            f"| {provenance.model} | {provenance.phase} | {markdown(provenance.folder)} | "
            f"{markdown(provenance.provider)} {_cell_code(provenance.served_model)} | "
            f"{provenance.episodes} | {provenance.sessions} | "
            f"{provenance.preregistration_hash[:16]} | {provenance.generator_hash[:16]} | "
            f"{provenance.engine_hash[:16]} | {provenance.records_sha256[:16]} |"
        )
    out.append("")
    return "\n".join(out)


def write_result(root: Path, result: ProbeResult) -> tuple[Path, Path]:
    """Write probe.json and probe.md into the probe folder; returns their paths."""
    json_path, md_path = root / RESULT_JSON, root / RESULT_MD
    json_path.write_bytes(result_json(result))
    md_path.write_text(render_probe(result), encoding="utf-8")
    return json_path, md_path
