"""`pddplan export` as library calls: every option by the command's own parameter name, the launch
files that realize the plan, and their writing.

    flags = ExportFlags("examples/plans/pdd-agent-64k-pdd.yaml", "pdd-agent-64k", "k8s", out=Path("k8s"))
    written = flags.write(flags.export())
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pddplan.export import Export, export_plan
from pddplan.export.files import write_files
from pddplan.scenarios.files import plan_scenario


@dataclass(frozen=True)
class ExportFlags:
    """Every option of `pddplan export`, by the command's parameter names; the target, engine and
    image are checked by `export_plan`."""

    plan: str
    workload: str
    target: str
    engine: str = "sglang"
    out: Path | None = None
    model_path: str | None = None
    gpus_per_node: int = 8
    image: str | None = None
    json_out: bool = False

    def export(self) -> Export:
        """The launch files of the plan on the workload, for the target (`export_plan`)."""
        scenario = plan_scenario(self.plan, self.workload)
        return export_plan(
            scenario,
            self.target,  # type: ignore[arg-type]  # checked by export_plan
            self.engine,  # type: ignore[arg-type]  # checked by export_plan
            self.model_path,
            self.gpus_per_node,
            self.image,
            source=self.plan,
        )

    def write(self, result: Export) -> list[Path]:
        """Write `result`'s files into the `out` folder (`write_files`); the paths written, none
        without `out`."""
        return write_files(self.out, result.files) if self.out is not None else []
