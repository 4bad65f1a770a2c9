"""Load the inputs a command needs, by catalog name or by file path, validated."""

from __future__ import annotations

from collections.abc import Container
from pathlib import Path
from typing import Any

# plan files are checked against the registered architectures (they register on import)
from pddplan import architectures as _registry  # noqa: F401
from pddplan.errors import InputError
from pddplan.inputs.hf_import import architecture_from_hf_config
from pddplan.perf.efficiency import efficiency_of
from pddplan.specs.hardware import HardwareProfile
from pddplan.specs.model import KvDtype, ModelArchitecture
from pddplan.specs.plan import Plan
from pddplan.specs.workload import Workload
from pddplan.support import catalog
from pddplan.support.loading import load, read_data, validate


def from_folder(base_dir: Path | None, name_or_path: str, catalog_names: Container[str]) -> str:
    """Where a name or path written in a file points: catalog names stay names; a relative file
    path is read from `base_dir` (the folder of the file that wrote it), never the working
    directory. With no `base_dir` (a command-line flag), the path is taken as given."""
    path = Path(name_or_path)
    if base_dir is None or name_or_path in catalog_names or path.is_absolute():
        return name_or_path
    looks_like_a_path = path.suffix.lower() in (".yaml", ".yml", ".json") or "/" in name_or_path
    if looks_like_a_path or (base_dir / path).exists():
        return str(base_dir / path)
    return name_or_path


def load_hardware(name_or_path: str, base_dir: Path | None = None) -> HardwareProfile:
    """A hardware profile from the catalog (`h100-sxm`) or a YAML file, a relative one read from
    `base_dir` when given (read each time: a run reads its profiles once, into its
    `pddplan.inputs.input_set.InputSet`)."""
    name_or_path = from_folder(base_dir, name_or_path, catalog.entries("hardware_profiles"))
    path = catalog.resolve("hardware_profiles", name_or_path, "GPU")
    profile = load(HardwareProfile, path)
    if path.parent == catalog.catalog_dir("hardware_profiles") and profile.name != path.stem:
        raise InputError(f"{path}: name = {profile.name!r}: must equal the file name {path.stem!r}")
    return profile


def load_hardware_catalog() -> dict[str, HardwareProfile]:
    """Every built-in hardware profile, by name."""
    return {name: load_hardware(name) for name in catalog.entries("hardware_profiles")}


def model_index() -> dict[str, dict[str, Any]]:
    """The model catalog's index: name -> provenance and published totals."""
    path = catalog.catalog_dir("model_catalog") / "index.yaml"
    data = read_data(path)
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping of model names")
    return data


def check_kv_dtype(value: str | None) -> KvDtype | None:
    """`--kv-dtype`'s value, checked: bf16, fp8, or None (the model's own)."""
    if value is None:
        return None
    dtypes: tuple[KvDtype, ...] = ("bf16", "fp8")
    for dtype in dtypes:
        if value == dtype:
            return dtype
    raise InputError(f"--kv-dtype = {value!r}: expected bf16 or fp8")


def workload_model(workload: Workload) -> ModelArchitecture:
    """The model `workload` serves: its catalog entry or config, with the workload's KV dtype and
    weight formats (`weights`, `expert_weights`) where it sets them."""
    return load_model(workload.model, workload.kv_dtype).with_weights(workload.weights, workload.expert_weights)


def load_model(name_or_path: str, kv_dtype: KvDtype | None = None) -> ModelArchitecture:
    """A model architecture from the catalog, a Hugging Face config.json, or a YAML architecture.

    `kv_dtype` overrides the catalog's default KV dtype (bf16 unless the index says otherwise).
    """
    index = model_index()
    if name_or_path in index:
        entry = index[name_or_path]
        path = catalog.catalog_dir("model_catalog") / str(entry.get("file", f"{name_or_path}.json"))
        if path.suffix in (".yaml", ".yml"):
            model = load(ModelArchitecture, path)
            return model.with_kv_dtype(kv_dtype) if kv_dtype else model
        model = architecture_from_hf_config(
            read_data(path),
            name=name_or_path,
            source=str(entry.get("source", path)),
            kv_dtype=kv_dtype or entry.get("kv_dtype", "bf16"),
            params_total_published=entry.get("params_total_published"),
            params_active_published=entry.get("params_active_published"),
        )
        if "weight_dtype" in entry:  # for abridged configs that lost their quantization_config
            model = model.model_copy(update={"weight_dtype": entry["weight_dtype"], "expert_weight_dtype": None})
        return model
    path = Path(name_or_path)
    if path.is_dir():
        if not (path / "config.json").exists():
            raise InputError(f"{name_or_path}: folder has no config.json")
        path = path / "config.json"
    if not path.exists():
        if path.suffix.lower() in (".json", ".yaml", ".yml") or "/" in name_or_path:
            raise InputError(catalog.not_found(name_or_path, "model", list(index)))
        raise InputError(f"unknown model '{name_or_path}'{catalog.suggest(name_or_path, list(index))}")
    data = read_data(path)
    if isinstance(data, dict) and ("layer_kinds" in data or "num_layers" in data):
        model = validate(ModelArchitecture, data, str(path))
        return model.with_kv_dtype(kv_dtype) if kv_dtype else model
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object (a Hugging Face config.json)")
    name = path.parent.name if path.name == "config.json" else path.stem
    return architecture_from_hf_config(data, name=name or "model", source=str(path), kv_dtype=kv_dtype)


def workload_dir(name_or_path: str) -> Path:
    """The folder a workload's relative paths (model file, capacity traces) are read from."""
    return catalog.resolve("workloads", name_or_path, "workload").resolve().parent


def load_plan(path: str) -> Plan:
    """A plan file (YAML or JSON), validated."""
    return load(Plan, Path(path))


def load_workload(name_or_path: str) -> Workload:
    """A workload from the catalog (`pdd-agent-64k`) or a YAML file, with its names checked."""
    path = catalog.resolve("workloads", name_or_path, "workload")
    return check_workload(load(Workload, path), path)


def check_workload(workload: Workload, path: Path) -> Workload:
    """What the schema cannot see: every GPU type names a hardware profile and the model loads.

    Relative paths (the model, a GPU profile file) are read from the workload file's folder, never
    the working directory, so a run gives the same answer wherever it starts. The model path is
    rewritten to that file; GPU types keep the string the workload wrote (plans name them so).
    """
    folder = path.resolve().parent
    model = from_folder(folder, workload.model, model_index())
    if model != workload.model:
        workload = workload.model_copy(update={"model": model})
    known = catalog.entries("hardware_profiles")
    for i, dc in enumerate(workload.deployment.datacenters):
        for j, offer in enumerate(dc.gpus):
            if offer.type in known:
                continue
            where = f"{path}: deployment.datacenters[{i}].gpus[{j}].type = {offer.type!r}"
            resolved = from_folder(folder, offer.type, known)
            if resolved != offer.type or Path(resolved).is_file():  # a file: what is wrong with it
                try:
                    load_hardware(offer.type, folder)
                except InputError as exc:
                    raise InputError(f"{where}: {exc}") from None
                continue
            hint = catalog.suggest(offer.type, list(known))
            raise InputError(f"{where}: unknown GPU{hint}")
    try:
        served = load_model(workload.model, workload.kv_dtype)
    except InputError as exc:
        raise InputError(f"{path}: model = {workload.model!r}: {exc}") from None
    try:
        served.with_weights(workload.weights, workload.expert_weights)
    except InputError as exc:
        raise InputError(f"{path}: {exc}") from None
    stack = workload.serving.stack
    if stack is not None:
        for dc in workload.deployment.datacenters:
            for offer in dc.gpus:
                try:
                    efficiency_of(load_hardware(offer.type, folder), stack)
                except InputError as exc:
                    raise InputError(f"{path}: serving.{exc}") from None
    return workload
