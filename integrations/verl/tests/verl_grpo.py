"""verl's GRPO grouping and advantage, re-implemented without torch for the CPU tests.

Read from verl v0.7.0 (github.com/volcengine/verl, tag v0.7.0, commit f9c855f):

- verl/trainer/ppo/ray_trainer.py, lines 1343-1353 and 1404: every dataset row of a
  training batch gets a fresh `uid` (uuid4), then the batch is repeated n times with
  `interleave=True`, so the n rollouts of a row are adjacent and share its uid;
  lines 232-245 (`compute_advantage`, GRPO branch): the advantage estimator is called
  with `index = data.non_tensor_batch["uid"]`.
- verl/trainer/ppo/core_algos.py, lines 264-330 (`compute_grpo_outcome_advantage`): the
  score of a rollout is the sum of its token-level rewards (the reward manager puts the
  whole reward on the last response token); rollouts are grouped by index; a group of
  one has mean 0 and std 1; otherwise mean and `torch.std` (the unbiased, n - 1 form);
  each advantage is (score - mean) / (std + epsilon), epsilon = 1e-6, or score - mean
  when `norm_adv_by_std_in_grpo` is false.

Rewards here are already the per-rollout sums, so the token dimension is left out.
"""

import math
from collections import defaultdict


def repeat_interleave(rows, n):
    """`DataProto.repeat(repeat_times=n, interleave=True)`: each row n times in a row,
    by reference (numpy's repeat of an object array)."""
    return [row for row in rows for _ in range(n)]


def compute_grpo_outcome_advantage(scores, index, epsilon=1e-6, norm_adv_by_std_in_grpo=True):
    """Advantages of `scores` (one per rollout) grouped by `index`, as verl computes them."""
    id2score = defaultdict(list)
    for s, i in zip(scores, index):
        id2score[i].append(float(s))
    id2mean, id2std = {}, {}
    for idx, group in id2score.items():
        if len(group) == 1:
            id2mean[idx], id2std[idx] = 0.0, 1.0
        else:
            mean = sum(group) / len(group)
            id2mean[idx] = mean
            id2std[idx] = math.sqrt(sum((x - mean) ** 2 for x in group) / (len(group) - 1))
    out = []
    for s, i in zip(scores, index):
        if norm_adv_by_std_in_grpo:
            out.append((float(s) - id2mean[i]) / (id2std[i] + epsilon))
        else:
            out.append(float(s) - id2mean[i])
    return out
