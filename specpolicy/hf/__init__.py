"""specpolicy policies inside transformers' own DFlash ``generate()`` (transformers >= 5.15).

- :func:`generate` / :func:`attach`: a policy picks the block size of every cycle of
  ``model.generate(..., speculation_type="dflash")``.
- :func:`to_transformers_assistant` / :func:`from_transformers_assistant`: checkpoint bridges between
  specpolicy's (z-lab's) DFlash drafter and transformers' ``MuseGlimmerAssistantModel``.
"""

from specpolicy.hf.api import Attachment, HFGeneration, as_assistant, attach, generate, resolve_policy
from specpolicy.hf.bridge import from_transformers_assistant, to_transformers_assistant
from specpolicy.hf.compat import DFLASH_MIN_TRANSFORMERS, require_dflash_support

__all__ = ["DFLASH_MIN_TRANSFORMERS", "Attachment", "HFGeneration", "as_assistant", "attach",
           "from_transformers_assistant", "generate", "require_dflash_support", "resolve_policy",
           "to_transformers_assistant"]
