"""What `export --json` prints."""

from __future__ import annotations

from pydantic import Field

from pddplan.support.outputs import Output


class ExportInstance(Output):
    name: str = Field(description="the instance's file and object name stem, e.g. prefill-0")
    role: str = Field(description="prefill, relay or decode")
    datacenter: str
    gpu: str
    gpus: int = Field(description="GPUs of one instance: tensor-parallel ranks x pipeline stages")
    pp: int = Field(default=1, description="pipeline stages (--pp-size, --pipeline-parallel-size); absent: 1")
    nodes: int
    layout: str = Field(
        description="ep (experts expert-parallel, data-parallel attention), tp-ep (experts expert-parallel, "
        "tensor-parallel attention) or tp"
    )
    kv_transfer: str = Field(description="rdma or tcp")
    max_running_requests: int | None


class Export(Output):
    """`export --json`."""

    target: str
    engine: str
    engine_version_checked: str
    plan: str
    architecture: str
    model_path: str
    instances: list[ExportInstance]
    files: dict[str, str] = Field(description="file name -> text, as --out writes them")
