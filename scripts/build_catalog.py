"""Regenerate kvplan/sources/model_specs/ from the real config.json files in ../shared/configs.

Plus scripts/catalog_extra/ (hand-written from public sources, see its SOURCES.md) for models the
shared set lacks, and vision_configs.json: the `vision_config` of published multimodal configs whose
copy in ../shared/configs dropped it (so the vision tower is counted, kvplan.readers.towers.vision).

Run by hand (`python scripts/build_catalog.py [CONFIG_DIR]`); it goes through the same import
path as `kvplan models import`. Checkpoint sizes come from the checkpoints.yaml beside the
configs (published safetensors index totals). Aliases that two entries would share are dropped
from the later one, so every alias names exactly one model.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from kvplan.sources.importer import build_spec, write_spec

ROOT = Path(__file__).resolve().parents[1]
# Names people type for models whose own config is not bundled but whose geometry is identical to
# one that is. Llama 3 70B and Llama 3.1 70B share every shape (80 layers, 8 KV heads x 128, the
# same widths and vocabulary); they differ only in RoPE scaling and context length, and the CLI
# prints which entry a name resolved to.
# Catalog names set by hand where the repo's own name would clash with another entry's: NVIDIA's ModelOpt FP8 export of
# Llama 3.1 405B Instruct and Meta's fbgemm one both read as llama-3.1-405b-instruct-fp8 (catalog_extra/SOURCES.md).
NAMES = {"nvidia/Llama-3.1-405B-Instruct-FP8": "nvidia-llama-3.1-405b-instruct-fp8"}
EXTRA_ALIASES = {"llama-3.1-70b": ["llama-3-70b"],
                 # NVIDIA writes these names with underscores; people type dots or the short name.
                 "llama-3_3-nemotron-super-49b-v1": ["llama-3.3-nemotron-super-49b", "nemotron-super-49b"],
                 "llama-3_1-nemotron-ultra-253b-v1": ["llama-3.1-nemotron-ultra-253b", "nemotron-ultra-253b"],
                 "nvidia-nemotron-3-nano-30b-a3b-bf16": ["nemotron-3-nano-30b-a3b", "nemotron-3-nano"],
                 "nvidia-nemotron-3-super-120b-a12b-bf16": ["nemotron-3-super-120b-a12b", "nemotron-3-super"],
                 "nvidia-nemotron-3-ultra-550b-a55b-bf16": ["nemotron-3-ultra-550b-a55b", "nemotron-3-ultra"]}


def main(config_dir: Path, out: Path = ROOT / "kvplan" / "sources" / "model_specs") -> None:
    """Write the catalog built from `config_dir` into `out` (the bundled folder unless a test names another)."""
    checkpoints = yaml.safe_load((config_dir / "checkpoints.yaml").read_text()) or {}
    for old in out.glob("*.json"):
        old.unlink()
    extra = ROOT / "scripts" / "catalog_extra"
    vision = json.loads((extra / "vision_configs.json").read_text())
    found = [*config_dir.glob("*.json"), *(p for p in extra.glob("*.json") if p.name != "vision_configs.json")]
    files = sorted(found, key=lambda p: (len(p.name), p.name))  # base models first
    taken: set[str] = set()
    specs = []
    for f in files:
        repo = f.stem.replace("__", "/", 1)
        size = (checkpoints.get(repo) or {}).get("checkpoint_bytes")
        config = json.loads(f.read_text())
        if repo in vision and "vision_config" not in config:  # the shared copy dropped it
            config["vision_config"] = vision[repo]
        spec, _ = build_spec(config, repo, name=NAMES.get(repo), source=f"config.json of {repo}",
                             checkpoint_bytes=size)
        taken.add(spec.name)
        specs.append(spec)
    for spec in specs:
        extra = EXTRA_ALIASES.get(spec.name, [])
        aliases = [a for a in [*extra, *spec.aliases] if a not in taken]
        taken.update(aliases)
        spec = spec.__class__(**{**spec.__dict__, "aliases": tuple(aliases)})
        write_spec(spec, out)
    print(f"wrote {len(specs)} specs to {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared" / "configs")
