"""The PagedAttention paper's memory-utilisation comparison, reproduced on its setting.

Figures from Kwon et al., SOSP 2023 (kvplan.simulator.paper cites them): Fig. 2 splits the KV
memory of contiguous reservations (Orca Max / Pow2 / Oracle) and of vLLM; Fig. 13 gives Orca
(Max)'s mean batch at ShareGPT 2 req/s as 7.00. kvplan models no buddy allocator (no external
fragmentation), so the contiguous comparisons use the shares kvplan does model and their ratios.
"""

import pytest

from kvplan.simulator.paper import PAPER_FIG2, PAPER_FIG13_SHAREGPT_2RPS, reproduce


@pytest.fixture(scope="module")
def ours():
    return reproduce(qps=2.0, duration=1800.0, seed=0)


def test_orca_max_batch_is_memory_bound_at_seven(ours):
    # 12 GiB / 800 KiB = 15,728 slots; 15,728 // 2,048 = 7 requests at once, the paper's 7.00.
    s = ours["max"]
    assert s["concurrency"]["max_running"] == 7 == int(PAPER_FIG13_SHAREGPT_2RPS["max"])
    assert 6.8 < s["concurrency"]["mean_running"] <= 7.0


def test_orca_max_memory_split_matches_fig2(ours):
    use, paper = ours["max"]["kv"]["memory_use_pct"], PAPER_FIG2["max"]
    assert use["token_states"] == pytest.approx(paper["token_states"], abs=2.5)
    assert use["reservation"] == pytest.approx(paper["reservation"], abs=2.5)
    assert use["internal_fragmentation"] == pytest.approx(paper["internal_fragmentation"], abs=3.5)
    # What is neither: 100 x (15,728.6 - 7 x 2,048) / 15,728.6 = 8.85% when 7 run all the time.
    assert use["unused"] == pytest.approx(paper["external_and_other"], abs=1.0)


@pytest.mark.parametrize("policy", ["pow2", "oracle"])
def test_reservation_to_token_states_ratio_matches_fig2(policy, ours):
    # Slots reserved for tokens still to come, per slot written: a property of the length
    # distribution (paper: 17.9 / 26.8 = 0.67 and 25.2 / 38.2 = 0.66).
    use, paper = ours[policy]["kv"]["memory_use_pct"], PAPER_FIG2[policy]
    assert use["reservation"] / use["token_states"] == pytest.approx(paper["reservation"] / paper["token_states"],
                                                                     abs=0.05)


def test_pow2_internal_fragmentation_ratio(ours):
    # At most 2x the output is reserved: paper 13.6 / 26.8 = 0.51 slots never written per slot
    # written; a property of the output lengths' shape, which the preset takes from the authors' artifact
    # (tests/test_workload_presets.py; with the old guessed sigma 0.9 it was 0.45).
    use, paper = ours["pow2"]["kv"]["memory_use_pct"], PAPER_FIG2["pow2"]
    assert use["internal_fragmentation"] / use["token_states"] == pytest.approx(
        paper["internal_fragmentation"] / paper["token_states"], abs=0.05)
    assert ours["oracle"]["kv"]["memory_use_pct"]["internal_fragmentation"] < 0.5  # only the last token's slot


def test_oracle_memory_split_matches_fig2(ours):
    # Oracle reserves each request's true output at admission: its split is the lengths' alone. Fig. 2: 38.2% token
    # states, 25.2% reservation, 36.6% external fragmentation and other (kvplan: no buddy allocator, so that share is
    # its unused pool). With the preset's old guessed shape these were 42.9 / 29.0 / 28.0.
    use, paper = ours["oracle"]["kv"]["memory_use_pct"], PAPER_FIG2["oracle"]
    assert use["token_states"] == pytest.approx(paper["token_states"], abs=1.5)
    assert use["reservation"] == pytest.approx(paper["reservation"], abs=1.5)
    assert use["unused"] == pytest.approx(paper["external_and_other"], abs=1.5)


def test_paged_keeps_almost_all_it_allocates_written(ours):
    # vLLM: 96.3% of its KV memory holds token states; the waste is the unwritten tail of last pages.
    written_share = 100 - ours["paged"]["kv"]["waste_pct"]
    assert PAPER_FIG2["paged"]["token_states"] - 1.0 <= written_share <= 100
    assert ours["paged"]["concurrency"]["mean_running"] > 1.9 * ours["max"]["concurrency"]["mean_running"]
