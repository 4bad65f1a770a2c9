"""pd-hetero: heterogeneous PD disaggregation inside one datacenter.

Prefill on one GPU type, decode on another, both in the home datacenter, the whole KV over RDMA:
the deployment of operators who pair a compute-strong prefill chip with a bandwidth-strong decode
chip where one datacenter offers both. Against pd-intra it isolates what the heterogeneous decode
GPU is worth; against pdd, what the cross-datacenter relay design adds. TTFT = wait + prefill +
RDMA + tau_D.
"""

from __future__ import annotations

from pddplan.architectures.base import Architecture, DecodeGpu, Pipeline, Transport
from pddplan.specs.workload import Workload


class PdHetero(Architecture):
    name = "pd-hetero"
    summary = "PD in one datacenter, decode on another GPU type, KV over RDMA"
    order = 1
    transport = Transport.RDMA
    decode_gpu = DecodeGpu.OTHER
    direct_pipeline = Pipeline.PD_RDMA

    def why_unavailable(self, workload: Workload, wan_options: int) -> str | None:
        home = workload.deployment.datacenter(workload.deployment.home)
        types = [offer.type for offer in home.gpus if offer.max_count > 0]
        if len(set(types)) < 2:
            return (
                f"the home datacenter {home.name} offers one GPU type ({', '.join(types) or 'none'}); "
                "heterogeneous PD in one datacenter needs two"
            )
        return None


ARCHITECTURE = PdHetero()
