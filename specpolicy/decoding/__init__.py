"""Lossless speculative decoding: verification rules, the decoder loop and its traces."""

from __future__ import annotations

from specpolicy.cycles import CycleRecord
from specpolicy.decoding.autoregressive import plain_decode
from specpolicy.decoding.decoder import SpeculativeDecoder
from specpolicy.decoding.session import DecodeSession
from specpolicy.decoding.trace import DecodeTrace
from specpolicy.decoding.verify import VerifyResult, greedy_verify, match_verify, speculative_sampling_verify
from specpolicy.state import DecodeState

__all__ = ["CycleRecord", "DecodeSession", "DecodeState", "DecodeTrace", "SpeculativeDecoder", "VerifyResult",
           "greedy_verify", "match_verify", "plain_decode", "speculative_sampling_verify"]
