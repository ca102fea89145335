#!/usr/bin/env python3
"""Tests of the GPU check's pieces that run without a GPU:
  - report.py on an empty output folder (every figure "not run", with why)
    and on fixture JSON of a measured run (values, targets, phase times);
  - hf_peer.verdict: a greedy divergence is accepted only at a near-tie;
  - with --build DIR: scripts/gpu-check.sh bundle --from-build DIR, then the
    bundle's `run` as a dry run: under 60 s, exit 0, every GPU figure
    "not run", each phase's time in the report.
  python3 tools/gpu_check/test_gpu_check.py [--build DIR]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools", "peer"))
import report  # noqa: E402
import hf_peer  # noqa: E402

BUILD = None


def read(path):
    with open(path) as f:
        return f.read()


def load(path):
    return json.loads(read(path))


class EmptyRun(unittest.TestCase):
    def test_every_figure_is_not_run_with_a_reason(self):
        with tempfile.TemporaryDirectory() as out:
            r = report.write(out)
            self.assertTrue(r["figures"])
            for f in r["figures"]:
                self.assertEqual(f["value"], report.NOT_RUN, f["name"])
                self.assertNotIn("meets_target", f)
            self.assertEqual(r["failed"], [])
            md = read(os.path.join(out, "report.md"))
            self.assertIn("Device: none (the preflight did not run)", md)
            self.assertEqual(load(os.path.join(out, "report.json"))["total_seconds"], 0)


class MeasuredRun(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "out")
        shutil.copytree(os.path.join(HERE, "testdata", "measured"), self.out)
        self.r = report.write(self.out)
        self.figs = {f["name"]: f for f in self.r["figures"]}

    def tearDown(self):
        self.tmp.cleanup()

    def test_figures_come_from_the_bench_with_their_targets_and_bounds(self):
        f = self.figs["decode step, 1 lane, context 64, tracing off (median)"]
        self.assertAlmostEqual(f["value"], 0.25)
        self.assertTrue(f["meets_target"])
        self.assertAlmostEqual(f["ratio_to_bound"], 0.25 / 0.2)
        f = self.figs["decode step, 1 lane, context 64, attention + residuals traced (median)"]
        self.assertAlmostEqual(f["value"], 0.45)
        self.assertFalse(f["meets_target"])
        self.assertAlmostEqual(self.figs["prefill 1,024 tokens, tracing off"]["value"], 4.0)
        self.assertAlmostEqual(self.figs["8 lanes / 1 lane"]["value"], 1.5)
        self.assertTrue(self.figs["8 lanes / 1 lane"]["meets_target"])
        f = self.figs["decode step, bf16 weights, 1 lane, context 64, tracing off (median)"]
        self.assertAlmostEqual(f["value"], 0.15)
        self.assertAlmostEqual(f["ratio_to_bound"], 1.5)
        self.assertAlmostEqual(self.figs["bf16 decode step / fp32 decode step"]["value"], 0.15 / 0.25)
        self.assertAlmostEqual(
            self.figs["bf16 decode step / fp32 decode step, in turn in one run (median of the pairs)"]["value"], 0.55)
        self.assertAlmostEqual(
            self.figs["f16 decode step / fp32 decode step, in turn in one run (median of the pairs)"]["value"], 0.56)
        peer = self.figs["TokenScope tokens/s / HF generate tokens/s (engine time)"]
        self.assertAlmostEqual(peer["value"], 12.5)
        self.assertTrue(peer["meets_target"])

    def test_a_failed_phase_gives_its_reason_to_its_figures(self):
        f = self.figs["decode step, 1 lane, context 1000, tracing off (median)"]
        self.assertEqual(f["value"], report.NOT_RUN)
        self.assertIn("bench_ctx1000: FAILED (out of memory)", f["why"])
        self.assertEqual(self.r["failed"], ["bench_ctx1000"])

    def test_phase_times_and_parity_tests_are_reported(self):
        self.assertEqual(list(self.r["phase_seconds"]), ["preflight", "gpu_tests", "memcheck", "bench", "peer"])
        self.assertAlmostEqual(self.r["total_seconds"], 2 + 40 + 30 + 60 + 50)
        self.assertEqual(self.r["parity_tests"]["CPU vs CUDA, GPT-2 124M shape, 1,000-token context (logits <= 1e-3)"],
                         "passed")
        self.assertEqual(self.r["parity_tests"]["decode across context buckets vs CPU"], "FAILED")
        md = read(os.path.join(self.out, "report.md"))
        self.assertIn("| gpu_tests | 40 |", md)
        self.assertIn("| total | 182 |", md)
        self.assertIn("NVIDIA H100 80GB HBM3", md)


class PeerVerdict(unittest.TestCase):
    base = {"same_prompt_ids": True, "logits_within_tolerance": True, "logits_max_abs_diff": 4e-4,
            "tokens_agreeing_prefix": 256, "same_tokens": True}

    def test_agreement_passes(self):
        ok, line = hf_peer.verdict(dict(self.base), 1e-3)
        self.assertTrue(ok, line)

    def test_a_divergence_at_a_near_tie_passes_and_says_so(self):
        r = dict(self.base, same_tokens=False, tokens_agreeing_prefix=131,
                 first_divergence={"step": 131, "tokenscope": 5, "hf": 9, "hf_top2_gap": 1.5e-3})
        ok, line = hf_peer.verdict(r, 1e-3)
        self.assertTrue(ok, line)
        self.assertIn("near-tie", line)
        self.assertIn("131", line)

    def test_a_divergence_with_a_clear_winner_fails(self):
        r = dict(self.base, same_tokens=False, tokens_agreeing_prefix=131,
                 first_divergence={"step": 131, "tokenscope": 5, "hf": 9, "hf_top2_gap": 0.05})
        self.assertFalse(hf_peer.verdict(r, 1e-3)[0])

    def test_logits_out_of_tolerance_or_other_prompt_ids_fail(self):
        self.assertFalse(hf_peer.verdict(dict(self.base, logits_within_tolerance=False, logits_max_abs_diff=0.2),
                                         1e-3)[0])
        self.assertFalse(hf_peer.verdict(dict(self.base, same_prompt_ids=False), 1e-3)[0])


class DryRun(unittest.TestCase):
    def test_bundle_then_dry_run_takes_under_a_minute_and_reports_every_phase(self):
        if not BUILD:
            self.skipTest("needs --build DIR (a build with ts_gpu_tests, tokenscope-bench, tokenscope-cli)")
        with tempfile.TemporaryDirectory() as tmp:
            bundle = os.path.join(tmp, "gpu-bundle")
            p = subprocess.run(["bash", os.path.join(ROOT, "scripts", "gpu-check.sh"), "bundle", "--from-build", BUILD,
                                "--out", bundle], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("gpu-check.sh run", p.stdout)
            manifest = read(os.path.join(bundle, "MANIFEST"))
            for b in ("bin/ts_gpu_tests", "bin/tokenscope-bench", "bin/tokenscope-cli", "report.py",
                      "tools/peer/hf_peer.py", "fixtures/tiny/config.json", "models/tokenscope-tiny/model.safetensors"):
                self.assertIn(" " + b + "\n", manifest)
            env = dict(os.environ, TS_GPU_CHECK_OUT=os.path.join(tmp, "out"), TS_GPU_CHECK_WORK=os.path.join(tmp, "w"),
                       PATH=os.environ.get("PATH", ""))
            t0 = time.monotonic()
            p = subprocess.run(["bash", os.path.join(bundle, "gpu-check.sh"), "run"], capture_output=True, text=True,
                               env=env, timeout=120)
            seconds = time.monotonic() - t0
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertLess(seconds, 60)
            r = load(os.path.join(tmp, "out", "report.json"))
            self.assertEqual(list(r["phase_seconds"]),
                             ["preflight", "gpu_tests", "memcheck", "bench", "peer", "bench_bf16"])
            self.assertTrue(r["device"]["bundle_loads"], r["device"])
            if not r["device"]["present"]:
                for f in r["figures"]:
                    self.assertEqual(f["value"], report.NOT_RUN, f["name"])
                self.assertEqual(r["checks"]["gpu_tests"]["result"], "not run")
                self.assertIn("host-side tests passed", r["checks"]["gpu_tests"]["detail"])
            md = read(os.path.join(tmp, "out", "report.md"))
            self.assertIn("| preflight |", md)
            print(f"dry run: {seconds:.1f} s")


if __name__ == "__main__":
    if "--build" in sys.argv:
        i = sys.argv.index("--build")
        BUILD = os.path.abspath(sys.argv[i + 1])
        del sys.argv[i:i + 2]
    unittest.main(verbosity=2)
