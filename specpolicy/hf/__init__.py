"""specpolicy policies inside transformers' DFlash ``generate()`` (>= 5.15), and checkpoint bridges."""

from specpolicy.hf.api import Attachment, HFGeneration, as_assistant, attach, generate, resolve_policy
from specpolicy.hf.bridge import from_transformers_assistant, to_transformers_assistant
from specpolicy.hf.compat import DFLASH_MIN_TRANSFORMERS, require_dflash_support

__all__ = ["DFLASH_MIN_TRANSFORMERS", "Attachment", "HFGeneration", "as_assistant", "attach",
           "from_transformers_assistant", "generate", "require_dflash_support", "resolve_policy",
           "to_transformers_assistant"]
