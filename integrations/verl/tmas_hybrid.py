"""Base and Bank rollouts of one question in one GRPO group: the logic, without verl.

The experience-utilization reward gives a correct Bank rollout (one that saw the experience
bank) r + beta * (1 - p_base), p_base being the share of correct Base rollouts of the same
group. GRPO normalises rewards within a group, the rollouts of one prompt (one `uid`), so
the bonus exists only when Base and Bank rollouts of one question share a group: added to
every correct rollout of a group it would standardise away. verl samples the n rollouts
of a group from one dataset row; `tmas_verl.TmasHybridAgentLoop` (the verl side, built on
this module) samples part of them from the row's Bank twin (`extra_info.bank_prompt`) and
tags each rollout with its kind, and `tmas_verl.TmasBatchRewardManager` hands the tags to
`tmas_reward.compute_score`.

Standard library only: the tests run it without verl, torch or numpy.
"""

import math
from collections import OrderedDict

#: Share of each experience group sampled from the Bank twin. The paper splits an
#: experience instance's rollouts into a Base group and a Bank group, with nothing to say
#: the two differ in size: half and half.
DEFAULT_BANK_FRACTION = 0.5

BASE = "base"
BANK = "bank"


def check_fraction(fraction):
    """The Bank share as a float in [0, 1), or ValueError: at 1 no rollout would be Base,
    and the reward needs p_base."""
    value = float(fraction)
    if not (0.0 <= value < 1.0) or math.isnan(value):
        raise ValueError(f"bank_fraction must be in [0, 1), got {fraction!r}")
    return value


def is_bank_copy(k, fraction):
    """Whether copy k (0-based) of a group is sampled from the Bank twin.

    Copy k is Bank when floor((k + 1) * f) > floor(k * f): the Bank copies are spread
    evenly, every prefix of the group holds its share of them (rounded down), and copy 0
    is always Base. So a group split between rollout workers, each counting its own
    copies from 0, still has a Base rollout in every part.
    """
    eps = 1e-9
    return math.floor((k + 1) * fraction + eps) > math.floor(k * fraction + eps)


def group_kinds(n, fraction):
    """The kinds of a group of n copies, in copy order."""
    return [BANK if is_bank_copy(k, fraction) else BASE for k in range(n)]


class GroupCopies:
    """Counts the copies of each group seen so far (verl hands a rollout worker the n
    copies of a row one by one, all with the row's `uid`). Remembers the last `capacity`
    groups only."""

    def __init__(self, capacity=100_000):
        self.capacity = capacity
        self._seen = OrderedDict()

    def next(self, key):
        """The copy number (from 0) of the next rollout of group `key`."""
        k = self._seen.pop(key, 0)
        self._seen[key] = k + 1
        while len(self._seen) > self.capacity:
            self._seen.popitem(last=False)
        return k


def bank_messages(extra_info):
    """The chat messages of a row's Bank twin (one user message, as `tmas rl-data` writes
    the Base prompt), or None for a row without one (not an experience row)."""
    info = extra_info or {}
    if info.get("_source") != "experience":
        return None
    text = info.get("bank_prompt")
    if not isinstance(text, str) or not text:
        return None
    return [{"role": "user", "content": text}]


def tag_extra_infos(extra_infos, kinds):
    """Per-rollout copies of `extra_infos` with `group_kind` set from `kinds` (None: left
    as it is). verl repeats a row's `extra_info` by reference for its n rollouts, so the
    tags must go on copies, never on the shared dict."""
    tagged = []
    for info, kind in zip(extra_infos, kinds):
        copy = dict(info or {})
        if kind in (BASE, BANK):
            copy["group_kind"] = kind
        tagged.append(copy)
    return tagged
