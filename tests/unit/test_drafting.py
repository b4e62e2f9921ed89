"""The hf backend's drafting (trtsweep.serve.drafting): the drafts of prompt lookup, the steps they make
over the decoded tokens, and the specDecodingStats an Engine with `speculative_config: {decoding_type: NGram}` or
`{decoding_type: DraftTarget}` (a draft model) puts in its iteration stats (the demo model, greedy)."""

from __future__ import annotations

import shutil

import pytest

from trtsweep.serve import drafting, hf_generate
from trtsweep.serve.drafting import NGramSettings

SETTINGS = NGramSettings(max_draft_len=3, max_matching_ngram_size=2)


def test_a_draft_is_what_followed_the_longest_earlier_suffix():
    assert drafting.draft([1, 2, 3, 4, 9, 1, 2], SETTINGS) == [3, 4, 9]  # suffix (1, 2) seen at 0
    assert drafting.draft([5, 6, 7, 8, 6], SETTINGS) == [7, 8, 6]  # (8, 6) never seen: (6,) at 1
    assert drafting.draft([1, 2, 3], SETTINGS) == []
    both = [1, 7, 1, 8, 1]
    assert drafting.draft(both, SETTINGS) == [7, 1, 8]
    assert drafting.draft(both, NGramSettings(3, 2, is_use_oldest=False)) == [8, 1]


def test_steps_accept_the_matching_draft_tokens_and_end_at_the_first_other():
    steps = drafting.DraftSteps(lambda context: drafting.draft(context, SETTINGS))
    context = [1, 2, 3, 4, 9, 1, 2]  # drafts [3, 4, 9]
    assert steps.feed(context, 3)["numDraftTokens"] == 0  # accepted, the step goes on
    assert steps.feed([*context, 3], 4)["numDraftTokens"] == 0
    ended = steps.feed([*context, 3, 4], 5)  # not 9: the target's own token ends the step
    assert (ended["numDraftTokens"], ended["numAcceptedTokens"], ended["numRequestsWithDraftTokens"]) == (3, 2, 1)
    assert ended["acceptanceLength"] == 3.0
    assert steps.feed([9, 9, 1], 1)["numRequestsWithDraftTokens"] == 0  # no draft: a plain step


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"decoding_type": "Eagle", "max_draft_len": 3},
         "the hf backend drafts by decoding_type NGram or DraftTarget only"),
        ({"decoding_type": "NGram", "max_draft_len": 3}, "max_matching_ngram_size: expected an integer >= 1"),
        ({"decoding_type": "NGram", "max_draft_len": 3, "max_matching_ngram_size": 2, "window": 1},
         "NGram has no field 'window'"),
        ({"decoding_type": "DraftTarget", "max_draft_len": 3}, "DraftTarget needs the draft model's directory"),
        ({"decoding_type": "DraftTarget", "max_draft_len": 3, "speculative_model": "/d", "max_matching_ngram_size": 2},
         "DraftTarget has no field 'max_matching_ngram_size'"),
    ],
)  # fmt: skip
def test_what_the_stand_in_cannot_draft_fails_its_start(config, message):
    with pytest.raises(ValueError, match=message):
        hf_generate.from_llm_args({"model": "/m", "speculative_config": config})


@pytest.mark.usefixtures("builtin_sys_intern")  # an earlier test may have imported ansible (tests/conftest.py)
def test_an_engine_with_ngram_drafting_reports_drafted_and_accepted_tokens(demo_model):
    llm_args = {
        "model": str(demo_model.hf_dir),
        "enable_iter_perf_stats": True,
        "speculative_config": {"decoding_type": "NGram", "max_draft_len": 4, "max_matching_ngram_size": 2},
    }
    settings, ignored = hf_generate.from_llm_args(llm_args)
    assert "speculative_config" not in ignored
    engine = hf_generate.Engine(settings)
    assert engine.iteration_stats is not None
    prompt = engine.encode("one two three one two three one two three one two")
    gen = hf_generate.Generation(prompt, hf_generate.Sampling(max_tokens=24, top_k=1, ignore_eos=True))
    chunks = [delta.text for delta in engine.generate(gen, lambda: False) if delta.text]
    stats = engine.iteration_stats.take()
    spec = [s["specDecodingStats"] for s in stats]
    assert len(spec) == len(gen.output_ids) == 24
    drafted = sum(s["numDraftTokens"] for s in spec)
    accepted = sum(s["numAcceptedTokens"] for s in spec)
    steps = sum(s["numRequestsWithDraftTokens"] for s in spec)
    assert 0 < accepted <= drafted and steps > 0  # a repeating prompt: the drafter finds its n-grams
    # a chunk for the context pass's token, then one per step (its accepted tokens and the target's own together,
    # as trtllm-serve streams them; a step that drafted nothing, its one token): output tokens less chunks is the
    # accepted tokens the stats count
    assert len(gen.output_ids) - len(chunks) == accepted and spec[0]["numDraftTokens"] == 0
    # replaying the drafter over the output (the context pass's token not drafted) gives the same counts (every step
    # closed, the last one too)
    replay = drafting.DraftSteps(engine.propose)
    counts = [drafting.stats(0, 0, 0)] + [replay.feed([*prompt, *gen.output_ids[:i]], t)
                                          for i, t in enumerate(gen.output_ids) if i > 0]  # fmt: skip
    counts[-1] = drafting.add(counts[-1], replay.close())
    assert (sum(c["numDraftTokens"] for c in counts), sum(c["numAcceptedTokens"] for c in counts)) == (
        drafted, accepted)  # fmt: skip


@pytest.mark.usefixtures("builtin_sys_intern")
@pytest.mark.parametrize("field", ["speculative_model", "speculative_model_dir"])  # 1.2's name, 1.0 and 1.1's
def test_an_engine_drafting_with_a_draft_model_loads_it_and_reports_its_drafts(demo_model, tmp_path, field):
    """The draft model is read from its own directory (the demo model's copy: greedy, it drafts what the target
    decodes, so nearly every drafted token is accepted); a missing draft fails the engine's start."""
    spec = {"decoding_type": "DraftTarget", "max_draft_len": 3, field: str(tmp_path / "draft")}
    settings, ignored = hf_generate.from_llm_args({"model": str(demo_model.hf_dir), "enable_iter_perf_stats": True,
                                                   "speculative_config": spec})  # fmt: skip
    assert "speculative_config" not in ignored
    with pytest.raises(ValueError, match=r"the draft model's directory .*/draft is not here"):
        hf_generate.Engine(settings)
    shutil.copytree(demo_model.hf_dir, tmp_path / "draft")
    engine = hf_generate.Engine(settings)
    prompt = engine.encode("Write one sentence about the sea.")
    gen = hf_generate.Generation(prompt, hf_generate.Sampling(max_tokens=12, top_k=1, ignore_eos=True))
    list(engine.generate(gen, lambda: False))
    assert engine.iteration_stats is not None
    spec_stats = [s["specDecodingStats"] for s in engine.iteration_stats.take()]
    drafted = sum(s["numDraftTokens"] for s in spec_stats)
    accepted = sum(s["numAcceptedTokens"] for s in spec_stats)
    assert len(spec_stats) == 12 and drafted >= 9  # a step every max_draft_len + 1 tokens at most
    assert accepted >= 0.8 * drafted, (drafted, accepted)
