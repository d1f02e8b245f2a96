"""The cycle-level API: a DecodeSession stepped by hand is generate(), and replay steps the same way."""

from __future__ import annotations

import numpy as np
import pytest

from specpolicy.cycles import Plan, run
from specpolicy.decoding import SpeculativeDecoder
from specpolicy.sweep.replay import build_replay

SIZES = [16, 2, 8, 1, 12, 4, 3]


def _rows(cycles):
    return [(c.block_size, c.accepted, c.committed) for c in cycles]


def test_stepping_a_session_by_hand_is_generate(trained_pair):
    decoder = SpeculativeDecoder(*trained_pair, max_new_tokens=40)
    prompt = [5, 9, 6, 9]
    session = decoder.start(prompt)
    while not session.done:
        assert session.state.generated == len(session.output)
        assert session.state.position == len(prompt) + len(session.output) - 1
        session.step(SIZES[session.state.cycle % len(SIZES)])
    trace = decoder.generate(prompt, Plan(lambda state: SIZES[state.cycle % len(SIZES)]))
    assert session.trace().output_ids == trace.output_ids
    assert _rows(session.cycles) == _rows(trace.cycles)
    with pytest.raises(RuntimeError, match="has ended"):
        session.step(4)


def test_replay_and_live_sessions_step_alike(trained_pair):
    decoder = SpeculativeDecoder(*trained_pair, max_new_tokens=40)
    prompt = [4, 7, 5, 9]
    table, _ = build_replay(decoder, prompt, sorted(set(SIZES)), max_new_tokens=40)
    live, replay = decoder.start(prompt), table.session()
    while not live.done:
        assert not replay.done
        size = SIZES[live.state.cycle % len(SIZES)]
        assert _rows([live.step(size)]) == _rows([replay.step(size)])
        assert (live.state.generated, live.state.position) == (replay.state.generated, replay.state.position)
        assert live.state.accepted_history == replay.state.accepted_history
    assert replay.done


@pytest.mark.parametrize("size", [1, 4, 16, 18])
def test_output_near_the_context_limit_does_not_depend_on_the_block_size(trained_pair, size):
    """A block that would run past the context shrinks to fit: every B outputs the same tokens."""
    decoder = SpeculativeDecoder(*trained_pair, max_new_tokens=40)
    decoder.max_positions = 20
    prompt = [5, 9, 6, 9]
    reference = decoder.generate(prompt, 1)
    trace = decoder.generate(prompt, size)
    assert trace.output_ids == reference.output_ids
    assert len(trace.output_ids) == 20 - len(prompt) + 1 and trace.stop_reason == "context"


def test_run_rejects_a_bad_block_size(trained_pair):
    session = SpeculativeDecoder(*trained_pair, max_new_tokens=8).start([5, 9])
    with pytest.raises(ValueError, match=r"block size must be an integer in 1\.\.64"):
        run(session, Plan(lambda state: 0))


SPLIT = [(16, 3), (8, 8), (1, 1), (12, 20), (4, 2), (2, None)]


def test_draft_then_verify_is_a_step_live_and_in_replay(trained_pair):
    """Two halves (draft B, look at the block, verify L) run the same cycles as step(B, L), live and replayed,
    and the block replay hands back carries the live block's confidences and entropies."""
    decoder = SpeculativeDecoder(*trained_pair, max_new_tokens=40)
    prompt = [4, 7, 5, 9]
    table, _ = build_replay(decoder, prompt, [1, 2, 4, 8, 12, 16], max_new_tokens=40, verify_lengths=True,
                            confidence_sizes=[2, 4, 8, 12, 16])
    stepped, live, replay = decoder.start(prompt), decoder.start(prompt), table.session()
    while not live.done:
        size, length = SPLIT[live.state.cycle % len(SPLIT)]
        block, replayed_block = live.draft(size), replay.draft(size)
        assert block.block_size == replayed_block.block_size
        assert block.confidences == replayed_block.confidences
        # entropies sum over the vocabulary: a batched pass may land one float16 step away from a single one
        np.testing.assert_allclose(block.entropies, replayed_block.entropies, rtol=2e-3, atol=1e-3)
        assert len(block.confidences) == len(block.entropies) == size - 1
        assert all(0 < c <= 1 for c in block.confidences) and all(e >= 0 for e in block.entropies)
        cycle = live.verify(length)
        assert _rows([cycle]) == _rows([replay.verify(length)]) == _rows([stepped.step(size, length)])
        assert cycle.verify_length == min(length or size, size)
    assert replay.done and stepped.done and live.output == stepped.output


def test_the_two_halves_refuse_to_run_out_of_order(trained_pair):
    decoder = SpeculativeDecoder(*trained_pair, max_new_tokens=20)
    table, _ = build_replay(decoder, [5, 9, 6], [1, 4], max_new_tokens=20, confidence_sizes=[4])
    for session in (decoder.start([5, 9, 6]), table.session()):
        with pytest.raises(RuntimeError, match="call draft"):
            session.verify(2)
        session.draft(4)
        with pytest.raises(RuntimeError, match="call verify"):
            session.draft(4)
        with pytest.raises(RuntimeError, match="call verify"):
            session.step(4)
        assert session.verify(2).verify_length == 2


def test_replay_without_confidences_refuses_draft_and_stays_put(trained_pair):
    decoder = SpeculativeDecoder(*trained_pair, max_new_tokens=20)
    table, _ = build_replay(decoder, [5, 9, 6], [1, 4], max_new_tokens=20)
    session = table.session()
    with pytest.raises(ValueError, match="--confidences"):
        session.draft(4)
    assert session.step(4).block_size == 4  # nothing was left half-done


def test_draft_at_the_context_limit_ends_the_decode(trained_pair):
    decoder = SpeculativeDecoder(*trained_pair, max_new_tokens=40)
    decoder.max_positions = 8
    session = decoder.start([5, 9, 6, 9])
    while not session.done:
        left = 8 - session.state.position
        block = session.draft(16)
        assert len(block.confidences) <= max(left - 1, 0)  # only the positions left are drafted ...
        cycle = session.verify()
        assert block.block_size in (0, 16) and cycle.block_size == 16  # ... and the policy's B is kept
        assert cycle.verify_length <= max(left, 16 * (not cycle.committed))  # the cap is the verify length
    assert session.stop_reason == "context"
    assert session.output == decoder.generate([5, 9, 6, 9], 1).output_ids
