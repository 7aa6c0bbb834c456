"""Unit tests of the verl hybrid-group pieces, without verl (stand-ins for its classes).

Run: python3 -m unittest discover -s integrations/verl/tests
"""

import asyncio
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import tmas_hybrid  # noqa: E402
import tmas_verl  # noqa: E402
from verl_grpo import compute_grpo_outcome_advantage, repeat_interleave  # noqa: E402


class Output:
    """verl's AgentLoopOutput, as far as the hybrid loop touches it."""

    def __init__(self, messages):
        self.messages = messages
        self.extra_fields = {}


class StandInSingleTurn:
    """verl's SingleTurnAgentLoop, as far as the hybrid loop relies on it: constructed
    with keyword arguments, `run` samples from kwargs["raw_prompt"]."""

    def __init__(self, **kwargs):
        self.kwargs = kwargs

    async def run(self, sampling_params, **kwargs):
        return Output(list(kwargs["raw_prompt"]))


class StandInBatchManager:
    """verl's BatchRewardManager.verify, as far as the manager relies on it: it passes
    `extra_info` to the reward function."""

    def verify(self, data):
        return list(data.non_tensor_batch["extra_info"])


class Data:
    def __init__(self, non_tensor_batch):
        self.non_tensor_batch = non_tensor_batch


def experience_row(index):
    return {
        "raw_prompt": [{"role": "user", "content": f"base prompt {index}"}],
        "extra_info": {
            "_source": "experience",
            "index": index,
            "bank_prompt": f"bank prompt {index}",
        },
    }


class SplitTests(unittest.TestCase):
    def test_a_group_gets_its_share_of_bank_copies_spread_and_starting_with_base(self):
        kinds = tmas_hybrid.group_kinds(16, 0.5)
        self.assertEqual(kinds.count("bank"), 8)
        self.assertEqual(kinds[:4], ["base", "bank", "base", "bank"])
        self.assertEqual(tmas_hybrid.group_kinds(16, 0.25).count("bank"), 4)
        self.assertEqual(tmas_hybrid.group_kinds(5, 0.0), ["base"] * 5)
        for n in range(1, 20):
            for f in (0.1, 0.3, 0.5, 0.75, 0.9):
                kinds = tmas_hybrid.group_kinds(n, f)
                self.assertEqual(kinds[0], "base")
                self.assertEqual(kinds.count("bank"), int(n * f + 1e-9))

    def test_fraction_is_checked(self):
        for bad in (1.0, -0.1, float("nan"), "x"):
            with self.assertRaises(ValueError):
                tmas_hybrid.check_fraction(bad)
        self.assertEqual(tmas_hybrid.check_fraction("0.25"), 0.25)

    def test_copies_are_counted_per_group_in_bounded_memory(self):
        copies = tmas_hybrid.GroupCopies(capacity=2)
        self.assertEqual([copies.next("a"), copies.next("a"), copies.next("b")], [0, 1, 0])
        copies.next("c")
        self.assertEqual(copies.next("a"), 0, "the oldest group was forgotten")

    def test_only_experience_rows_with_a_bank_twin_have_bank_messages(self):
        self.assertEqual(
            tmas_hybrid.bank_messages(experience_row(1)["extra_info"]),
            [{"role": "user", "content": "bank prompt 1"}],
        )
        self.assertIsNone(tmas_hybrid.bank_messages({"_source": "normal", "bank_prompt": "x"}))
        self.assertIsNone(tmas_hybrid.bank_messages({"_source": "experience"}))
        self.assertIsNone(tmas_hybrid.bank_messages(None))


class AgentLoopTests(unittest.TestCase):
    def run_group(self, loop_cls, row, uid, n):
        async def all_copies():
            outs = []
            for copy in repeat_interleave([row], n):
                loop = loop_cls(bank_fraction=0.5)
                outs.append(await loop.run({}, uid=uid, **copy))
            return outs

        return asyncio.run(all_copies())

    def test_the_hybrid_loop_samples_half_a_group_from_the_bank_twin_and_tags_each(self):
        loop_cls = tmas_verl.make_agent_loop(StandInSingleTurn)
        self.assertEqual(loop_cls.__qualname__, "TmasHybridAgentLoop")
        outs = self.run_group(loop_cls, experience_row(7), "uid-7", 8)
        kinds = [o.extra_fields["tmas_group_kind"] for o in outs]
        self.assertEqual(kinds, tmas_hybrid.group_kinds(8, 0.5))
        for o, kind in zip(outs, kinds):
            self.assertEqual(o.messages[0]["content"], f"{kind} prompt 7")
        # A normal row is sampled from its prompt, every rollout Base.
        row = {"raw_prompt": [{"role": "user", "content": "q"}], "extra_info": {"_source": "normal"}}
        outs = self.run_group(loop_cls, row, "uid-n", 4)
        self.assertEqual([o.extra_fields["tmas_group_kind"] for o in outs], ["base"] * 4)
        self.assertTrue(all(o.messages[0]["content"] == "q" for o in outs))
        with self.assertRaises(ValueError):
            loop_cls(bank_fraction=1.0)

    def test_the_reward_manager_tags_copies_not_the_shared_extra_info(self):
        manager = tmas_verl.make_reward_manager(StandInBatchManager)()
        shared = {"_source": "experience", "index": 3}
        data = Data({"extra_info": [shared] * 4, "tmas_group_kind": ["base", "bank", "base", "bank"]})
        infos = manager.verify(data)
        self.assertEqual([i["group_kind"] for i in infos], ["base", "bank", "base", "bank"])
        self.assertNotIn("group_kind", shared)
        # Without the loop's tags the batch passes as it is.
        untagged = manager.verify(Data({"extra_info": [shared]}))
        self.assertEqual(untagged, [shared])


class VerlGrpoTests(unittest.TestCase):
    def test_groups_by_index_with_the_unbiased_std(self):
        # Group a: rewards 1, 1, -1, -1 -> mean 0, unbiased std sqrt(4/3).
        adv = compute_grpo_outcome_advantage([1, -1, 1, -1, 5], ["a", "a", "a", "a", "b"])
        std = (4 / 3) ** 0.5
        for got, want in zip(adv[:4], [1 / std, -1 / std, 1 / std, -1 / std]):
            self.assertAlmostEqual(got, want / (1 + 1e-6 / std), places=9)
        self.assertAlmostEqual(adv[4], 5.0 / (1 + 1e-6), places=9, msg="a group of one: mean 0, std 1")
        same = compute_grpo_outcome_advantage([1, 1, 1], ["g"] * 3)
        self.assertEqual(same, [0.0, 0.0, 0.0])
        self.assertEqual(compute_grpo_outcome_advantage([2, 0], ["g", "g"], norm_adv_by_std_in_grpo=False), [1.0, -1.0])


if __name__ == "__main__":
    unittest.main()
