"""Hybrid-RL rewards for verl, computed by a running `tmas rl-serve`.

verl's batch reward manager calls `compute_score` once per training batch with parallel
lists; this file sends the batch to `tmas rl-serve` (POST /score) and returns one reward per
rollout. Rollouts of one dataset row (the same `extra_info.index`) form one GRPO group,
which is what the experience-utilization reward needs (p_base is a share within the group).

Settings (environment variables):
  TMAS_RL_URL      the service, default http://127.0.0.1:8799
  TMAS_RL_TIMEOUT  seconds to wait for one batch, default 3600 (judge calls included)

`mode` (verl: `+reward_model.reward_kwargs.mode=standard`) scores every group with the
standard reward (vanilla GRPO) instead of each row's own (`hybrid`, the service's default).

Standard library only, so it runs in any verl environment.
"""

import json
import os
import urllib.error
import urllib.request

URL = os.environ.get("TMAS_RL_URL", "http://127.0.0.1:8799").rstrip("/")
TIMEOUT = float(os.environ.get("TMAS_RL_TIMEOUT", "3600"))


def _rollout(data_source, solution_str, ground_truth, extra_info):
    info = extra_info or {}
    source = info.get("_source", "normal")
    index = info.get("index", 0)
    split = info.get("split", "train")
    rollout = {
        "question_id": str(info.get("question_id", index)),
        "group_id": f"{data_source}/{split}/{index}",
        "_source": source,
        "ground_truth": str(ground_truth),
        "question": info.get("question", ""),
        "guideline_bank": list(info.get("guideline_bank") or []),
        "response": solution_str,
    }
    # `TmasBatchRewardManager` (tmas_verl.py) sets group_kind from the hybrid agent loop's
    # tag: "bank" for a rollout sampled from `bank_prompt`; all others are Base.
    if source == "experience":
        rollout["group_kind"] = info.get("group_kind", "base")
    return rollout


def compute_score(data_sources, solution_strs, ground_truths, extra_infos, mode=None, **kwargs):
    """verl batch reward function: a list of rewards, one per rollout, in input order."""
    rollouts = [
        _rollout(d, s, g, e)
        for d, s, g, e in zip(data_sources, solution_strs, ground_truths, extra_infos)
    ]
    batch = {"rollouts": rollouts}
    if mode is not None:
        batch["mode"] = mode
    body = json.dumps(batch).encode("utf-8")
    request = urllib.request.Request(
        f"{URL}/score", data=body, headers={"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            scored = json.load(response)
    except urllib.error.HTTPError as e:
        detail = e.read().decode("utf-8", "replace")
        raise RuntimeError(f"tmas rl-serve refused the batch ({e.code}): {detail}") from e
    counts = scored.get("counts", {})
    if counts.get("undecided", 0) or counts.get("novelty_failed", 0):
        print(f"tmas rl-serve: some rewards rest on a fallback: {counts}")
    return [
        {
            "score": r["reward"],
            "correct": float(r["correct"]),
            "tmas_advantage": r["advantage"],
        }
        for r in scored["rollouts"]
    ]
