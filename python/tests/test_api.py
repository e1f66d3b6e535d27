"""`import infinipipe`: configuration with the CLI's options and messages, plans of every schedule
and their JSON, simulation, the layout search, the online cost fit, checkpoints."""

import json
import os
import pydoc
import unittest

import numpy as np

import infinipipe as ip
from common import LENGTHS, MODEL, TempDir

WORDS = MODEL + ["--pp", "2", "--memory-budget", "10MiB", "--global-batch-size", "12"]


class Configuration(unittest.TestCase):
    def test_flags_and_yaml_resolve_alike(self):
        a = ip.Config.from_args(WORDS)
        b = ip.Config.from_yaml(a.to_yaml())
        self.assertEqual(a.to_yaml(), b.to_yaml())
        self.assertEqual((a.pp, a.dp, a.vpp, a.schedule), (2, 1, 1, "epp"))
        self.assertEqual(a.model.num_key_value_heads, 2)
        self.assertEqual(a.get("num-layers"), "8")
        self.assertIn("memory-budget", ip.Config.keys())

    def test_errors_are_the_commands_in_two_classes(self):
        with self.assertRaises(ip.ConfigError) as e:
            ip.Config.from_args(["--num-layer", "4"])
        self.assertIn("did you mean 'num-layers'?", str(e.exception))
        self.assertTrue(issubclass(ip.ConfigError, ip.Error))
        with self.assertRaises(ip.ConfigError) as e:
            ip.Config.from_args(["--vpp", "2", "--schedule", "1f1b"])
        self.assertIn("--schedule epp or interleaved", str(e.exception))
        with self.assertRaises(ip.Error):
            ip.Plan.from_json("{not json")
        with self.assertRaises(ip.BudgetError) as e:
            ip.plan(LENGTHS, ip.Config.from_args(MODEL + ["--memory-budget", "1MiB"]))
        self.assertGreater(e.exception.least_budget, 1 << 20)


class Planning(unittest.TestCase):
    def test_every_schedule_plans_valid_and_round_trips_through_json(self):
        cfg = ip.Config.from_args(WORDS + ["--vpp", "2"])
        for schedule in ip.schedules():
            with self.subTest(schedule=schedule):
                r = ip.plan(LENGTHS, cfg, schedule=schedule)
                p = r.plan
                self.assertEqual(p.schedule, schedule)
                self.assertEqual(sorted(p.seq_lengths), sorted(LENGTHS))
                covered = sum(s.len for c in p.chunks for s in c.slices)
                self.assertEqual(covered, sum(LENGTHS))
                back = ip.Plan.from_json(p.to_json())
                self.assertEqual(back.to_json(), p.to_json())
                sim = ip.simulate(p, cfg)
                self.assertAlmostEqual(sim.step_time, p.predicted_step_time, places=9)
                self.assertFalse(sim.oom)

    def test_layout_search_ranks_feasible_layouts(self):
        cfg = ip.Config.from_args(MODEL + ["--global-batch-size", "12"])
        ranking = json.loads(ip.search_layout(cfg, [LENGTHS], num_devices=4))
        layouts = ranking["layouts"]
        self.assertEqual(ranking["num_devices"], 4)
        self.assertTrue(layouts[0]["feasible"])
        feasible = [x["tokens_per_s"] for x in layouts if x["feasible"]]
        self.assertEqual(feasible, sorted(feasible, reverse=True))
        self.assertTrue(all(x["pp"] * x["dp"] * x["ulysses"] == 4 for x in layouts))

    def test_cost_feedback_learns_a_slower_machine(self):
        cfg = ip.Config.from_args(WORDS)
        prior = ip.CostModel.from_config(cfg)
        plan = ip.plan(LENGTHS, cfg, prior).plan
        fb = ip.CostFeedback(prior)
        for _ in range(30):  # every action takes twice its prediction
            for rank in range(plan.pp):
                measured = [(i, 2 * a.predicted_time) for i, a in enumerate(plan.actions[rank])]
                fb.observe(plan, prior, cfg, rank, measured)
        learned = fb.next_cost_model(fb.share())
        again = ip.plan(LENGTHS, cfg, learned).plan
        self.assertGreater(again.predicted_step_time, 1.5 * plan.predicted_step_time)
        self.assertIn("coefficients", fb.calibration_json(fb.share()))


class Checkpoints(unittest.TestCase):
    def test_a_shard_saved_from_python_reads_back_exactly(self):
        cfg = ip.Config.from_args(MODEL + ["--vocab-size", "257"])  # the byte tokenizer's
        params = ip.init_params(cfg)
        rng = np.random.default_rng(3)
        states = {n: (7, rng.standard_normal(v.shape).astype(np.float32),
                      rng.random(v.shape).astype(np.float32)) for n, v in params.items()}
        with TempDir() as d:
            ip.checkpoint_save_shard(d, 7, 0, 1, params, cfg, states)
            ip.checkpoint_commit(d, cfg, cfg.to_yaml(), 7, 56)
            self.assertEqual(ip.checkpoint_latest(d), 7)
            r = ip.CheckpointReader(d)
            self.assertEqual((r.iteration, r.consumed_samples, r.optimizer_kind), (7, 56, "adamw"))
            back = r.read_params(r.param_names())
            for n, v in params.items():
                np.testing.assert_array_equal(back[n], v)
            saved = r.read_optimizer(cfg, list(params))
            for n, (step, m, v) in states.items():
                self.assertEqual(saved[n][0], step)
                np.testing.assert_array_equal(saved[n][1], m)
                np.testing.assert_array_equal(saved[n][2], v)
            self.assertEqual(ip.Config.from_yaml(r.config_yaml).to_yaml(), cfg.to_yaml())
            out = os.path.join(d, "hf")
            self.assertEqual(ip.export_hf(d, out), 7)
            model, values = ip.read_hf(out)
            self.assertEqual(model.num_layers, cfg.model.num_layers)
            np.testing.assert_array_equal(values["model.norm.weight"], params["model.norm.weight"])


class Documentation(unittest.TestCase):
    def test_help_and_type_stubs(self):
        text = pydoc.render_doc(ip, renderer=pydoc.plaintext)
        for name in ("Config", "plan", "simulate", "search_layout", "CostFeedback",
                     "CheckpointReader", "TrainingBatches", "ConfigError"):
            self.assertIn(name, text)
        self.assertTrue(ip.plan.__doc__ and "schedule" in ip.plan.__doc__)
        stubs = os.path.join(os.path.dirname(ip.__file__), "_core.pyi")
        with open(stubs) as f:
            text = f.read()
        for name in dir(ip._core):
            if not name.startswith("_"):
                self.assertTrue(name in text, f"_core.pyi lacks {name}")


if __name__ == "__main__":
    unittest.main()
