"""Summaries of catalog entries for `pddplan hardware|models|workloads` (plain dicts, SI units)."""

from __future__ import annotations

from typing import Any

from pddplan.inputs import (
    check_kv_dtype,
    load_hardware,
    load_hardware_catalog,
    load_model,
    load_workload,
    model_index,
)
from pddplan.inputs.outputs import Catalog
from pddplan.perf.arithmetic import param_counts, weight_bytes
from pddplan.perf.kv import kv_breakdown, kv_bytes_per_token, kv_formula
from pddplan.specs.hardware import HardwareProfile
from pddplan.specs.model import ModelArchitecture
from pddplan.specs.workload import Workload
from pddplan.support.catalog import entries


def hardware_summary(profile: HardwareProfile) -> dict[str, Any]:
    """The four dimensions, power and price of one GPU, with every figure's source."""
    figures: dict[str, dict[str, Any]] = {}  # nested as in the profile's YAML: figures[group][name]
    for path, fig in profile.figures().items():
        group, name = path.split(".", 1)
        figures.setdefault(group, {})[name] = {
            "value": fig.value,
            "source": fig.source,
            "as_of": fig.as_of,
            "note": fig.note,
        }
    rental = profile.price.rental_usd_per_gpu_hour
    return {
        "name": profile.name,
        "description": profile.description,
        "stands_for": profile.stands_for,
        "figures": figures,
        "rental_usd_per_gpu_hour": rental.value if rental else None,
        "efficiency": profile.efficiency.model_dump() if profile.efficiency else None,
        "stack_efficiency": {name: f.model_dump() for name, f in sorted(profile.stack_efficiency.items())},
        "sources": {key: src.model_dump() for key, src in profile.sources.items()},
    }


def model_summary(model: ModelArchitecture) -> dict[str, Any]:
    """Parameter counts, weight bytes and KV bytes per token, with the per-layer-kind breakdown."""
    counts = param_counts(model)
    kv = kv_breakdown(model)
    return {
        "name": model.name,
        "source": model.source,
        "attention": model.attention_kind,
        "layers": {kind: model.count(kind) for kind in ("full", "sliding", "linear") if model.count(kind)},
        "moe": model.moe.model_dump() if model.moe else None,
        "params_total": counts.total,
        "params_active": counts.active,
        "params_total_published": model.params_total_published,
        "params_active_published": model.params_active_published,
        "params_breakdown": {
            "embedding": counts.embedding,
            "lm_head": counts.lm_head,
            "attention": counts.attention,
            "norms": counts.norms,
            "dense_ffn": counts.dense_ffn,
            "routed_experts": counts.routed_experts_total,
            "routed_experts_active": counts.routed_experts_active,
            "shared_experts_and_routers": counts.shared_and_router,
        },
        "weight_dtype": model.weight_dtype,
        "expert_weight_dtype": model.expert_dtype,
        "weight_bytes": weight_bytes(model),
        "kv_dtype": model.kv_dtype,
        "kv_bytes_per_token": kv_bytes_per_token(model),
        "kv_breakdown": {
            "full_bytes_per_token": kv.full_bytes_per_token,
            "sliding_bytes_per_token": kv.sliding_bytes_per_token,
            "sliding_window_tokens": kv.sliding_window_tokens,
            "linear_state_bytes_per_sequence": kv.linear_state_bytes,
        },
        "kv_formula": kv_formula(model),
    }


def workload_summary(workload: Workload) -> dict[str, Any]:
    """The workload's traffic in numbers: means of its distributions, SLA, prices, options."""
    return {
        "name": workload.name,
        "description": workload.description,
        "model": workload.model,
        "kv_dtype": workload.kv_dtype,
        "rate_rps": workload.arrival.rate_rps,
        "arrival_process": workload.arrival.process,
        "arrival_cv": workload.arrival.cv,
        "prompt_tokens_mean": workload.prompt_tokens.mean(),
        "output_tokens_mean": workload.output_tokens.mean(),
        "hit_rate_mean": workload.hit_rate.mean(),
        "hit_buckets": [b.model_dump() for b in workload.hit_rate.resolved_buckets()],
        "sla": workload.sla.model_dump(),
        "prices": workload.prices.model_dump(),
        "datacenters": [dc.model_dump() for dc in workload.deployment.datacenters],
        "wan_lines": [line.model_dump() for line in workload.deployment.wan_lines],
        "serving": workload.serving.model_dump(),
    }


# -- what each browsing command shows -------------------------------------------------------------
def hardware_rows() -> list[Catalog]:
    """`hardware list`: the summary of every built-in GPU profile."""
    return [Catalog(**hardware_summary(profile)) for profile in load_hardware_catalog().values()]


def hardware_details(name: str) -> Catalog:
    """`hardware show`: the summary of one GPU profile (a built-in name or a YAML file)."""
    return Catalog(**hardware_summary(load_hardware(name)))


def model_rows(kv_dtype: str | None = None) -> list[Catalog]:
    """`models list`: the summary of every catalog model, its KV cache in `kv_dtype` (checked;
    None: each model's own)."""
    dtype = check_kv_dtype(kv_dtype)
    return [Catalog(**model_summary(load_model(name, dtype))) for name in model_index()]


def model_details(name: str, kv_dtype: str | None = None) -> Catalog:
    """`models show`: the summary of one model (a catalog name, config.json or model YAML), its KV
    cache in `kv_dtype` (checked; None: the model's own)."""
    return Catalog(**model_summary(load_model(name, check_kv_dtype(kv_dtype))))


def workload_rows() -> list[Catalog]:
    """`workloads list`: the summary of every shipped workload."""
    return [Catalog(**workload_summary(load_workload(name))) for name in entries("workloads")]


def workload_details(name: str) -> Catalog:
    """`workloads show`: the summary of one workload (a shipped name or a YAML file), validated."""
    return Catalog(**workload_summary(load_workload(name)))
