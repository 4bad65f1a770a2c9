"""pd-intra: homogeneous PD disaggregation inside one datacenter (the article's 88 x GPU-A baseline).

Prefill and decode run on the same GPU type in the home datacenter; the whole KV of a finished
prefill goes to a decoder over RDMA. TTFT = wait + prefill + RDMA + tau_D.
"""

from __future__ import annotations

from pddplan.architectures.base import Architecture, DecodeGpu, Pipeline, Transport


class PdIntra(Architecture):
    name = "pd-intra"
    summary = "PD in one datacenter, one GPU type, KV over RDMA"
    order = 0
    transport = Transport.RDMA
    decode_gpu = DecodeGpu.SAME
    direct_pipeline = Pipeline.PD_RDMA


ARCHITECTURE = PdIntra()
