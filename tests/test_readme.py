"""Every `kvplan ...` command in README.md runs, as written, and ends the way the README says (issue 15);
every ```python block runs too, and prints the figures the README's comments work out by hand.

Commands are read from the README's unlabelled ``` blocks and its 4-space indented blocks (a line
ending in `\\` continues). Each runs in-process (CliRunner) in a scratch folder holding the files
the README names: `prices.yaml` is the README's own ```yaml block, `vllm-startup.log` a real vLLM
log from tests/fixtures, `trtllm-startup.log` TensorRT-LLM#6294's (tests/fixtures/logs/corpus),
`bench-result.json` a published vLLM benchmark result from tests/fixtures/bench, `requests.jsonl` the
sample trace in docs/examples, `./my-finetune/` a Llama config, `Llama-3.1-8B-Instruct-Q4_K_M.gguf` a
GGUF header of that model (conftest.llama_31_8b_gguf), and the Hub repo is served by
tests/hub_server.py. `--device cuda` runs need CUDA and skip without it, saying so. Lines that are
not kvplan commands (pip, scripts, pytest) are listed in NOT_KVPLAN, so a new one cannot go unrun.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import REPO, llama_31_8b_gguf

README = (REPO / "README.md").read_text()
NOT_KVPLAN = {  # installation and test commands: .ci/run itself runs the first two's equivalents
    "bash scripts/test.sh",
    "python3 -m venv .venv && .venv/bin/pip install -q . && .venv/bin/kvplan fit llama-3-70b --gpu a100-80 --ctx 128k",
    "python -m venv .venv-llamacpp",
    ".venv-llamacpp/bin/pip install llama-cpp-python==0.3.16 gguf numpy pytest -e .",
    ".venv-llamacpp/bin/python -m pytest -q tests/test_llamacpp_gguf.py",
    "pip install 'kvplan[validate]'",
    "scripts/validate_gpu.sh results-$(hostname).json cuda",
    "python -m pytest -q tests/test_validate.py -k cuda",
}
# exit codes the README documents for these commands: cheapest exits 6 when nothing meets the target
EXPECTED_EXIT = {"cheapest llama-3.1-70b --ctx 128k --concurrency 32 --prices prices.yaml "
                 "--min-tokens-per-second 20": (0, 6),
                 "cheapest llama-3.1-70b --ctx 128k --concurrency 32 --prices prices.yaml": (0, 6),
                 # disagg refuses the prefill pool of ai-dynamo/dynamo#10104 (exit 6), as the README says
                 "disagg llama-3.1-70b-instruct --gpu h100 --weight-dtype fp8 --isl 4k --osl 512 --prefill-tp 1 "
                 "--decode-tp 4 --prefill-max-model-len 128k": (6,)}
# meta-llama/Llama-3.1-8B-Instruct's config.json (the keys kvplan reads), for the fake Hub and ./my-finetune/
LLAMA_31_8B = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
    "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "torch_dtype": "bfloat16",
    "tie_word_embeddings": False, "hidden_act": "silu",
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
}


def command_lines(text: str) -> list[str]:
    """The command lines of the README's unlabelled fenced blocks and indented blocks, comments cut."""
    lines, out, fence = text.splitlines(), [], None
    for line in lines:
        if line.startswith("```"):
            fence = None if fence is not None else line[3:].strip()
            continue
        if fence == "" or (fence is None and line.startswith("    ") and line.strip()):
            out.append(line.strip())
    joined, cur = [], ""
    for line in out:
        cur += (" " if cur else "") + line.rstrip("\\").strip()
        if not line.endswith("\\"):
            joined.append(re.sub(r"\s+#\s.*$", "", cur).strip())
            cur = ""
    return [c for c in joined if c]


COMMANDS = command_lines(README)
KVPLAN = [c for c in COMMANDS if c.startswith("kvplan ")]


def test_readme_lines_are_commands():
    assert len(KVPLAN) >= 15
    assert set(COMMANDS) - set(KVPLAN) == NOT_KVPLAN


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    import sys

    sys.path.insert(0, str(REPO / "tests"))
    from hub_server import FakeHub, FakeRepo, serving

    llama_31_8b_gguf(tmp_path / "Llama-3.1-8B-Instruct-Q4_K_M.gguf")  # its header; the data sparse
    (tmp_path / "my-finetune").mkdir()
    (tmp_path / "my-finetune" / "config.json").write_text(json.dumps(LLAMA_31_8B))
    prices = re.search(r"```yaml\n(.*?)```", README, re.S).group(1)
    (tmp_path / "prices.yaml").write_text(prices)
    shutil.copy(REPO / "tests" / "fixtures" / "logs" / "vllm_v0_llama31_8b_rtx3090_20k.log",
                tmp_path / "vllm-startup.log")
    shutil.copy(REPO / "tests" / "fixtures" / "logs" / "corpus" / "trtllm-6294-llama31-8b-fp8-h100.log",
                tmp_path / "trtllm-startup.log")
    shutil.copy(REPO / "docs" / "examples" / "requests.jsonl", tmp_path / "requests.jsonl")
    shutil.copy(REPO / "tests" / "fixtures" / "bench" / "vllm-l40s-llama32-3b-10qps.json",
                tmp_path / "bench-result.json")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KVPLAN_HOME", str(tmp_path / "kvplan-home"))
    server = FakeHub(max_hang_s=10.0)
    server.add("meta-llama/Llama-3.1-8B-Instruct", FakeRepo.single({"config.json": json.dumps(LLAMA_31_8B).encode()}))
    with serving(server, monkeypatch, tmp_path / "hf_home"):
        yield tmp_path


@pytest.mark.parametrize("command", KVPLAN, ids=lambda c: c[7:60])
def test_readme_command_runs(command, scratch):
    from kvplan.cli import app

    args = shlex.split(command)[1:]
    if "--device" in args and args[args.index("--device") + 1].startswith("cuda"):
        torch = pytest.importorskip("torch", reason="validate needs torch")
        if not torch.cuda.is_available():
            pytest.skip("a --device cuda example: CUDA is not available here")
    if args[0] == "validate":
        pytest.importorskip("torch", reason="validate needs torch (the [validate] extra)")
    result = CliRunner().invoke(app, args)
    allowed = EXPECTED_EXIT.get(" ".join(args), (0,))
    assert result.exit_code in allowed, f"{command}\n{result.output[-2000:]}"
    assert "internal error" not in result.output and "Traceback" not in result.output


def test_readme_hub_example_reads_the_hub(scratch):
    # The opening block's "from the Hub (config + safetensors metadata)" line named a repo id the catalog has, so it
    # ran from the catalog and never asked the Hub (this test's fake Hub served it unread). With --revision it reads
    # the Hub; without, stderr says the catalog answered and how to read the Hub instead.
    from kvplan.cli import app

    (line,) = [c for c in KVPLAN if c.startswith("kvplan fit meta-llama/")]
    assert "# from the Hub" in next(raw for raw in README.splitlines() if raw.startswith(line))
    r = CliRunner().invoke(app, shlex.split(line)[1:])
    assert r.exit_code == 0, r.output
    assert "meta-llama/Llama-3.1-8B-Instruct@main from the Hugging Face Hub" in r.stderr
    r = CliRunner().invoke(app, ["fit", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100", "--ctx", "8k"])
    assert r.exit_code == 0, r.output
    said = r.stderr.splitlines()[0]
    assert said == ("model: meta-llama/Llama-3.1-8B-Instruct → llama-3.1-8b-instruct "
                    "(meta-llama/Llama-3.1-8B-Instruct) from the catalog; --revision main reads it from the Hub")


def test_readme_deepseek_layout_figures_are_what_its_commands_print():
    # README's "DeepSeek-V3 on 8 x H200 at 32k holds ..." sentence quotes its layout commands' answers (kvplan's
    # own overhead estimate; tests/test_layouts.py checks the hand arithmetic with a fixed 2 GiB overhead).
    from kvplan.cli import app

    flat = " ".join(README.split())
    m = re.search(r"DeepSeek-V3 on 8 × H200 at 32k holds (\d+) requests at tp 8, (\d+) at dp 8 \+ ep 8 and (\d+) at "
                  r"tp 8 \+ dcp 8 with kvplan's own rules.*?`--emit vllm` implies `--engine vllm`\): (\d+) at dp 8",
                  flat)
    assert m, "the README's DeepSeek-V3 layout sentence moved"
    runs = [(["--tp", "8"], m[1]), (["--dp", "8", "--ep", "8"], m[2]), (["--tp", "8", "--dcp", "8"], m[3]),
            (["--dp", "8", "--ep", "8", "--emit", "vllm"], m[4])]
    for flags, quoted in runs:
        r = CliRunner().invoke(app, ["fit", "deepseek-v3", "--gpu", "h200", *flags, "--ctx", "32k", "--json"])
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["max_concurrency"] == int(quoted), flags


PYTHON_BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)


def test_readme_python_blocks_run_and_print_the_hand_arithmetic(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KVPLAN_HOME", str(tmp_path / "kvplan-home"))
    assert PYTHON_BLOCKS, "the README's Python API example moved"
    spaces = []
    for block in PYTHON_BLOCKS:
        spaces.append({})
        exec(compile(block, "README.md", "exec"), spaces[-1])  # noqa: S102 - the README's own example
    lines = capsys.readouterr().out.splitlines()
    # Llama-3.1-8B (its config.json: 32 layers, 8 KV heads, head_dim 4096 / 32 = 128, bf16), K and V:
    assert lines[0] == str(32 * 2 * 8 * 128 * 2) == "131072"
    assert lines[1] == str(131_072 * 32 * 1024) == "4294967296"  # a 32k sequence: 2,048 whole 16-token pages
    plan = spaces[0]["plan"]
    assert lines[2] == \
        f"{plan.kv_memory_bytes_per_gpu // plan.kv_bytes_per_sequence_per_gpu} {plan.max_concurrency >= 8}"
    assert lines[-1] == "context 12q 2 context '12q' is not a token count (try 32768, 32k, 128K or 1M)"
    # kvplan.disagg: Llama-3.1-70B's 8,192-token prompt, 80 x 2 x 8 x 128 x 2 B x 8,192; decode tp 8 holds 1 of 8 heads
    assert lines[-2] == f"{80 * 2 * 8 * 128 * 2 * 8192} {80 * 2 * 1 * 128 * 2 * 8192}" == "2684354560 335544320"


SPEED_DOCS = ("docs/speed.md", "docs/speed-history.md")
# `docs/speed.md, "Name"` (or 'Name'): a paragraph of the speed pages, named where code, tests and docs cite it
CITED = re.compile(r"(docs/speed(?:-history)?\.md)[,:]?\s+([\"'])([^\n]+?)\2")


def test_speed_docs_exist_hold_no_commands_and_their_citations_resolve():
    """The README's speed section points to docs/speed.md and docs/speed-history.md (the model's rules and its
    history, moved out of the README verbatim): both exist, neither holds a command block the README test would
    not run, and every place that cites one of their paragraphs by name ("The recency paragraph") finds it there."""
    for doc in (*SPEED_DOCS, "docs/budget.md"):  # docs/budget.md: the budget section's misses, moved alike
        assert f"({doc})" in README, f"the README no longer links {doc}"
        assert command_lines((REPO / doc).read_text()) == [], f"{doc} holds a command block: run it in test_readme"
    assert all((REPO / link).is_file() for link in re.findall(r"\]\((docs/[^)#\s]+)", README))
    texts = {doc: re.sub(r"\s+", " ", (REPO / doc).read_text()) for doc in SPEED_DOCS}
    speed_fixtures = REPO / "tests" / "fixtures" / "speed"
    citing = [REPO / "README.md", REPO / "ARCHITECTURE.md", *(REPO / "docs").glob("*.md"),
              *(REPO / "kvplan").rglob("*.py"),
              *speed_fixtures.glob("*.y*ml"), speed_fixtures / "README.md"]
    cites = [(path.name, doc, name) for path in citing
             for doc, _, name in CITED.findall(re.sub(r"\n\s*#\s*", " ", path.read_text()))]
    # cited without quotes: the per-request note of simulate & co. (kvplan/cli/speed_flags.py), the 70B KV row
    cites += [("speed_flags.py", "docs/speed.md", "The fitted per-request cost"),
              ("engines.md", "docs/speed.md", "The 70B KV row")]
    flags = (REPO / "kvplan" / "cli" / "speed_flags.py").read_text()
    assert "(docs/speed.md: The fitted per-request cost)" in flags
    assert len(cites) >= 12
    missing = [c for c in cites if c[2] not in texts[c[1]]]
    assert missing == [], missing


_NAMED_HERE = re.compile(r'"([A-Z][^"\n]{2,60}?)",? (below|above)\b')


def test_a_quoted_below_or_above_names_a_paragraph_on_the_same_page():
    """`"The drain row" below` points at a heading, bold lead or paragraph that starts with that name on this page,
    on the side it says: a move of text to another page (the README's speed section -> docs/) must rename the page."""
    bad = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = page.read_text()
        for m in _NAMED_HERE.finditer(text):
            name, side = m.group(1).rstrip(".,"), m.group(2)
            lead = re.compile(r"^(?:#+ |\*\*|\| )?" + re.escape(name), re.M)
            starts = [h.start() for h in lead.finditer(text)]
            if not any(h > m.end() if side == "below" else h < m.start() for h in starts):
                bad.append(f"{page.name}:{text[:m.start()].count(chr(10)) + 1}: \"{name}\" {side}")
    assert not bad, "\n".join(bad)
