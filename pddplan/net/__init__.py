"""Network models: RDMA inside a datacenter, TCP over WAN lines, line-capacity fluctuation."""
