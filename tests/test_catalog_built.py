"""The bundled catalog is what scripts/build_catalog.py makes of ../shared/configs today.

A field added to the model spec (e.g. `ssm_dtype_default`, round 32) reaches users only when the catalog is rebuilt:
a stale JSON silently takes the field's default (Nemotron-H 56B's recurrent state was priced in the config's fp32 under
vLLM 0.13-0.19, where vLLM's hook gives float16 to a config that states none). This test rebuilds into a temporary
folder and compares file by file."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import CONFIGS, REPO, load_script


def test_the_bundled_catalog_is_what_build_catalog_writes(tmp_path: Path):
    if not (CONFIGS / "checkpoints.yaml").is_file():
        pytest.skip("../shared/configs is not here (a user's clone has no ../shared)")
    build = load_script("scripts/build_catalog.py", "build_catalog_for_test")
    build.main(CONFIGS, tmp_path)
    bundled = REPO / "kvplan" / "sources" / "model_specs"
    built = {p.name: p.read_text() for p in tmp_path.glob("*.json")}
    have = {p.name: p.read_text() for p in bundled.glob("*.json")}
    assert sorted(built) == sorted(have)
    stale = [name for name in sorted(built) if built[name] != have[name]]
    assert not stale, f"rebuild the catalog (python scripts/build_catalog.py): {stale}"
