"""A policy decoded live: oracles are refused by their own plan, whichever engine entry a caller uses."""

from __future__ import annotations

import pytest

from specpolicy.decoding import SpeculativeDecoder
from specpolicy.decoding.engine import decode
from specpolicy.registry import create_policy


@pytest.mark.parametrize("name", ["oracle", "oracle-tau", "oracle-step", "oracle-verify"])
def test_an_oracle_decoded_live_is_refused_with_the_replay_hint(trained_pair, name):
    decoder = SpeculativeDecoder(*trained_pair, max_new_tokens=6)
    with pytest.raises(ValueError, match="replay"):
        decode(decoder, [4, 7, 5], create_policy(name, (1, 2, 4)))
