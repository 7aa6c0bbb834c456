"""Base and Bank rollouts of one question in one GRPO group, end to end on CPU.

What verl 0.7.0 does with a training batch, with the model and the trainer replaced by
stand-ins that follow its code (see verl_grpo.py for the lines read):

1. every experience row (from `tmas rl-data`) gets a uid and is repeated n times,
   interleaved, the copies sharing the row's `extra_info` by reference;
2. each copy goes through `tmas_verl.TmasHybridAgentLoop` (built on a stand-in for
   verl's SingleTurnAgentLoop whose model is a `tmas sim-server` on loopback), which
   samples part of the group from the row's Bank twin and tags every rollout;
3. `tmas_verl.TmasBatchRewardManager` (on a stand-in for verl's BatchRewardManager.verify)
   hands the tags to `tmas_reward.compute_score`, which scores the batch with a running
   `tmas rl-serve` under the hybrid reward and under the standard one (vanilla GRPO);
4. the advantages are verl's GRPO advantages (verl_grpo.py), grouped by uid.

Checks: each rollout was sampled from the prompt of its kind; per group, its share of
Bank rollouts; every reward (a correct Bank rollout gets
1 + beta * (1 - p_base) under the hybrid reward, 1 under the standard one); every
advantage against the formula (r - mean) / (std + 1e-6) with the unbiased std, and against
the service's own advantage (run it with --std sample). Then: in every group with a
correct Base rollout, a correct Bank rollout and a wrong one, the correct Bank rollouts'
advantage is higher under the hybrid reward than under the standard one, and higher than
the correct Base rollouts' (under the standard reward the two are equal). Prints a JSON
summary; exits 1 on a failed check.

Usage: hybrid_e2e.py --rows ROWS.jsonl --sim http://127.0.0.1:P --n 16 --fraction 0.5
       (TMAS_RL_URL names the rl-serve service)
"""

import argparse
import asyncio
import json
import os
import statistics
import sys
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import tmas_hybrid  # noqa: E402
import tmas_reward  # noqa: E402
import tmas_verl  # noqa: E402
from verl_grpo import compute_grpo_outcome_advantage, repeat_interleave  # noqa: E402

BETA = 0.6
EPSILON = 1e-6


class Output:
    def __init__(self, prompt, text):
        self.prompt = prompt
        self.text = text
        self.extra_fields = {}


def make_sim_loop(sim):
    """A stand-in for verl's SingleTurnAgentLoop whose model is the simulator."""

    class SimSingleTurn:
        def __init__(self, **kwargs):
            pass

        async def run(self, sampling_params, **kwargs):
            info = kwargs["extra_info"]
            body = {
                "model": "tmas-sim",
                "messages": list(kwargs["raw_prompt"]),
                "max_tokens": 4096,
                "temperature": 1.0,
            }
            request = urllib.request.Request(
                f"{sim}/v1/chat/completions",
                data=json.dumps(body).encode("utf-8"),
                headers={
                    "content-type": "application/json",
                    "x-tmas-role": "solution",
                    "x-tmas-problem": str(info["question_id"]),
                },
            )

            def call():
                with urllib.request.urlopen(request, timeout=120) as response:
                    return json.load(response)["choices"][0]["message"]["content"]

            return Output(body["messages"][0]["content"], await asyncio.to_thread(call))

    return SimSingleTurn


class BatchVerify:
    """verl's BatchRewardManager.verify, as far as the reward function sees it."""

    def __init__(self, mode):
        self.mode = mode

    def verify(self, data):
        nt = data.non_tensor_batch
        return tmas_reward.compute_score(
            data_sources=nt["data_source"],
            solution_strs=nt["responses"],
            ground_truths=[rm.get("ground_truth") for rm in nt["reward_model"]],
            extra_infos=nt["extra_info"],
            mode=self.mode,
        )


class Data:
    def __init__(self, non_tensor_batch):
        self.non_tensor_batch = non_tensor_batch


def advantage_by_formula(rewards, i):
    mean = statistics.fmean(rewards)
    return (rewards[i] - mean) / (statistics.stdev(rewards) + EPSILON)


def mean(values):
    return statistics.fmean(values) if values else None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", required=True)
    p.add_argument("--sim", required=True)
    p.add_argument("--n", type=int, default=16)
    p.add_argument("--fraction", type=float, default=tmas_hybrid.DEFAULT_BANK_FRACTION)
    args = p.parse_args()
    with open(args.rows, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)

    # 1-2: uid per row, n interleaved copies, each through the hybrid agent loop.
    for i, row in enumerate(rows):
        row["uid"] = f"uid-{i}"
    copies = repeat_interleave(rows, args.n)
    loop_cls = tmas_verl.make_agent_loop(make_sim_loop(args.sim.rstrip("/")))

    async def rollouts():
        tasks = [
            asyncio.create_task(
                loop_cls(bank_fraction=args.fraction).run(
                    {}, uid=c["uid"], raw_prompt=c["prompt"], extra_info=c["extra_info"]
                )
            )
            for c in copies
        ]
        return await asyncio.gather(*tasks)

    outputs = asyncio.run(rollouts())
    uids = [c["uid"] for c in copies]
    kinds = [o.extra_fields["tmas_group_kind"] for o in outputs]
    for j, (c, o, kind) in enumerate(zip(copies, outputs, kinds)):
        sent = c["extra_info"]["bank_prompt"] if kind == "bank" else c["prompt"][0]["content"]
        check(o.prompt == sent, f"rollout {j} ({kind}) was not sampled from its {kind} prompt")
    batch = {
        "data_source": [c["data_source"] for c in copies],
        "responses": [o.text for o in outputs],
        "reward_model": [c["reward_model"] for c in copies],
        "extra_info": [c["extra_info"] for c in copies],  # shared by reference, as in verl
        "tmas_group_kind": kinds,
    }

    # 3-4: rewards under each mode, then verl's advantages.
    scored = {}
    for mode in ("hybrid", "standard"):
        manager = tmas_verl.make_reward_manager(BatchVerify)(mode)
        results = manager.verify(Data(dict(batch)))
        rewards = [r["score"] for r in results]
        scored[mode] = {
            "rewards": rewards,
            "correct": [r["correct"] == 1.0 for r in results],
            "service": [r["tmas_advantage"] for r in results],
            "verl": compute_grpo_outcome_advantage(rewards, uids, epsilon=EPSILON),
        }
    check(scored["hybrid"]["correct"] == scored["standard"]["correct"], "correctness differs by mode")
    check(not any("group_kind" in r["extra_info"] for r in rows), "a shared extra_info was tagged")

    groups = []
    for g, row in enumerate(rows):
        idx = [j for j, u in enumerate(uids) if u == row["uid"]]
        gk = [kinds[j] for j in idx]
        correct = [scored["hybrid"]["correct"][j] for j in idx]
        check(gk == tmas_hybrid.group_kinds(args.n, args.fraction), f"group {g}: kinds {gk}")
        base = [c for c, k in zip(correct, gk) if k == "base"]
        p_base = sum(base) / len(base)
        stats = {
            "uid": row["uid"],
            "p_base": p_base,
            "correct_base": sum(base),
            "correct_bank": sum(c for c, k in zip(correct, gk) if k == "bank"),
        }
        for mode in ("hybrid", "standard"):
            s = scored[mode]
            rewards = [s["rewards"][j] for j in idx]
            for pos, j in enumerate(idx):
                bonus = BETA * (1 - p_base) if (mode == "hybrid" and gk[pos] == "bank" and correct[pos]) else 0.0
                want = (1.0 if correct[pos] else -1.0) + bonus
                check(abs(rewards[pos] - want) < 1e-9, f"{mode} reward {g}/{pos}: {rewards[pos]} vs {want}")
                formula = advantage_by_formula(rewards, pos)
                check(abs(s["verl"][j] - formula) < 1e-9, f"{mode} advantage {g}/{pos}")
                check(abs(s["service"][j] - s["verl"][j]) < 1e-6, f"{mode} service advantage {g}/{pos}")

            def adv(kind, ok):
                return mean([s["verl"][j] for pos, j in enumerate(idx) if gk[pos] == kind and correct[pos] == ok])

            stats[mode] = {
                "correct_bank": adv("bank", True),
                "correct_base": adv("base", True),
                "wrong_bank": adv("bank", False),
                "wrong_base": adv("base", False),
            }
        stats["three_levels"] = (
            any(c for c, k in zip(correct, gk) if k == "bank")
            and 0 < p_base
            and not all(correct)
        )
        groups.append(stats)

    mixed = [s for s in groups if s["three_levels"]]
    check(mixed, "no group with a correct Base, a correct Bank and a wrong rollout: the test shows nothing")
    for s in mixed:
        h, v = s["hybrid"], s["standard"]
        check(h["correct_bank"] > v["correct_bank"] + 1e-9, f"{s['uid']}: Bank advantage did not rise")
        check(h["correct_bank"] > h["correct_base"] + 1e-9, f"{s['uid']}: hybrid Bank not above Base")
        check(abs(v["correct_bank"] - v["correct_base"]) < 1e-9, f"{s['uid']}: standard Bank differs from Base")

    def pooled(mode, key, among):
        vals = [s[mode][key] for s in among if s[mode][key] is not None]
        return mean(vals)

    summary = {
        "groups": len(groups),
        "rollouts_per_group": args.n,
        "bank_fraction": args.fraction,
        "groups_with_three_reward_levels": len(mixed),
        "mean_p_base": mean([s["p_base"] for s in groups]),
        "mean_advantage_in_those_groups": {
            mode: {key: pooled(mode, key, mixed) for key in ("correct_bank", "correct_base", "wrong_bank", "wrong_base")}
            for mode in ("hybrid", "standard")
        },
        "groups_detail": groups,
        "failures": failures,
    }
    print(json.dumps(summary, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
