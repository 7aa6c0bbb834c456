"""verl classes that put Base and Bank rollouts of one question in one GRPO group.

Works with verl 0.7.0 (its agent loop: `actor_rollout_ref.rollout.mode=async`, the
default there) and the batch reward manager path (`reward_model.use_reward_loop=False`,
so rewards are computed per batch, where a group's p_base can be seen):

- `TmasHybridAgentLoop`: a single-turn agent loop (verl's `SingleTurnAgentLoop`) that
  samples part of each experience row's n rollouts from the row's Bank twin
  (`extra_info.bank_prompt`) instead of its Base prompt, `bank_fraction` of them (0.5 by
  default), and tags every rollout (`tmas_group_kind`: `base` or `bank`). Other rows are
  sampled as by `SingleTurnAgentLoop`. All n rollouts keep the row's `uid`, so they are one
  GRPO group.
- `TmasBatchRewardManager`: verl's batch reward manager, which hands each rollout's tag to
  the reward function as `extra_info["group_kind"]` (on a per-rollout copy of the row's
  `extra_info`, which verl shares between the row's rollouts).

`integrations/verl/README.md` has the config lines. The logic is in `tmas_hybrid.py`
(tested without verl); this file only fits it to verl's classes.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tmas_hybrid import (  # noqa: E402
    BANK,
    BASE,
    DEFAULT_BANK_FRACTION,
    GroupCopies,
    bank_messages,
    check_fraction,
    is_bank_copy,
    tag_extra_infos,
)

#: Copies seen per group in this rollout worker (verl runs a worker's agent loops on one
#: event loop, so the count needs no lock).
COPIES = GroupCopies()


def make_agent_loop(base):
    """The hybrid agent loop on top of `base` (verl's `SingleTurnAgentLoop`)."""

    class TmasHybridAgentLoop(base):
        def __init__(self, *args, bank_fraction=DEFAULT_BANK_FRACTION, **kwargs):
            super().__init__(*args, **kwargs)
            self.bank_fraction = check_fraction(bank_fraction)

        async def run(self, sampling_params, **kwargs):
            info = kwargs.get("extra_info") or {}
            kind = BASE
            messages = bank_messages(info)
            if messages is not None:
                # The copies of one row share its uid (and its index, without a uid).
                group = kwargs.get("uid", info.get("index"))
                if is_bank_copy(COPIES.next(group), self.bank_fraction):
                    kind = BANK
                    kwargs = dict(kwargs, raw_prompt=messages)
            output = await super().run(sampling_params, **kwargs)
            output.extra_fields["tmas_group_kind"] = kind
            return output

    TmasHybridAgentLoop.__module__ = __name__
    TmasHybridAgentLoop.__qualname__ = "TmasHybridAgentLoop"
    return TmasHybridAgentLoop


def make_reward_manager(base):
    """The reward manager on top of `base` (verl's `BatchRewardManager`)."""

    class TmasBatchRewardManager(base):
        def verify(self, data):
            kinds = data.non_tensor_batch.get("tmas_group_kind")
            if kinds is not None:
                tagged = tag_extra_infos(data.non_tensor_batch["extra_info"], kinds)
                try:
                    import numpy as np

                    array = np.empty(len(tagged), dtype=object)
                    array[:] = tagged
                    tagged = array
                except ImportError:
                    pass
                data.non_tensor_batch["extra_info"] = tagged
            return super().verify(data)

    TmasBatchRewardManager.__module__ = __name__
    TmasBatchRewardManager.__qualname__ = "TmasBatchRewardManager"
    return TmasBatchRewardManager


try:
    from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop
    from verl.workers.reward_manager.batch import BatchRewardManager
except ImportError:  # Not inside verl: the factories above are what the tests use.
    pass
else:
    TmasHybridAgentLoop = make_agent_loop(SingleTurnAgentLoop)
    TmasBatchRewardManager = make_reward_manager(BatchRewardManager)
