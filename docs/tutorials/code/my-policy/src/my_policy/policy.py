"""A third-party policy: larger blocks when the target is confident after prefill."""

from specpolicy.features import compact
from specpolicy.hookspecs import hookimpl
from specpolicy.policy import Policy, PromptObservation


class EntropyPolicy(Policy):
    """Low next-token entropy (nats) -> the largest candidate; high entropy -> the smallest. The tiny target's
    entropies after prefill run from about 2.9 to 4.6 nats on held-out prompts (median 4.0)."""

    def __init__(self, candidates, threshold: float = 4.0):
        super().__init__(candidates)
        self.threshold = threshold

    def select(self, observation: PromptObservation) -> int:
        entropy = float(compact(observation.logits)[0, 0])
        return self.candidates[-1] if entropy < self.threshold else self.candidates[0]


@hookimpl
def register_policies(register):
    register("entropy", lambda arg, candidates: EntropyPolicy(candidates, float(arg) if arg else 4.0),
             description="largest block below an entropy threshold (entropy:T), else the smallest")
