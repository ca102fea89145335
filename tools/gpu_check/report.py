#!/usr/bin/env python3
"""The GPU check's report: OUT/report.json and OUT/report.md from what the
phases of scripts/gpu-check.sh left in OUT.

  python3 tools/gpu_check/report.py OUT

Reads (each may be missing: a phase that did not run, or was cut short):
  status.json   {check: {result, detail, seconds}}, one entry per check
  timings.json  {phase: seconds}, in the order the phases ran
  device.json   the preflight: GPU, driver, CUDA runtime, whether the bundle loads
  gpu_tests.json, tf32_tests.json   GoogleTest JSON of the GPU tests
  bench_fp32.json, bench_bf16.json, bench_formats16.json, bench_ctx1000.json, bench_tf32.json,
  bench_no_graphs.json
                tokenscope-bench --device cuda JSON
  peer.json     tools/peer/hf_peer.py's summary
Every figure that was not measured is "not run", with the reason the checks
give. Nothing here runs anything.
"""
import json
import os
import sys

NOT_RUN = "not run"

# The targets for GPT-2 124M fp32 on an H100 (ms unless said).
TARGET_DECODE_UNTRACED_MS = 0.300
TARGET_DECODE_TRACED_MS = 0.400
TARGET_PREFILL_1024_MS = 5.0
TARGET_PREFILL_1024_TRACED_MS = 10.0
TARGET_HF_SPEEDUP = 10.0
TARGET_8_LANES_RATIO = 2.0
TARGET_LOGITS_DIFF = 1e-3


def load(out, name):
    try:
        with open(os.path.join(out, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def check_note(status, *names):
    """Why a figure is missing: the first of `names` that did not end "ok"."""
    for n in names:
        s = status.get(n)
        if s and s["result"] != "ok":
            if s["result"] == NOT_RUN and s.get("detail"):
                return s["detail"]
            return f"{n}: {s['result']}" + (f" ({s['detail']})" if s.get("detail") else "")
    return NOT_RUN


def by_trace(rows):
    return {r.get("trace"): r for r in rows or []}


class Figures:
    def __init__(self):
        self.rows = []

    def add(self, name, value, unit, target=None, better="lower", bound=None, why=None):
        f = {"name": name, "unit": unit}
        if value is None:
            f["value"] = NOT_RUN
            f["why"] = why or NOT_RUN
        else:
            f["value"] = value
        if target is not None:
            f["target"] = target
            if value is not None:
                f["meets_target"] = value <= target if better == "lower" else value >= target
        if bound is not None and value is not None:
            f["bound"] = bound
            f["ratio_to_bound"] = value / bound
        self.rows.append(f)


def gtest_results(doc):
    results = {}
    for suite in (doc or {}).get("testsuites", []):
        for tc in suite.get("testsuite", []):
            name = f"{suite['name']}.{tc['name']}"
            if tc.get("failures"):
                results[name] = "FAILED"
            elif tc.get("result") == "SKIPPED":
                results[name] = NOT_RUN
            else:
                results[name] = "passed"
    return results


def build_report(out):
    status = load(out, "status.json") or {}
    timings = load(out, "timings.json") or {}
    device = load(out, "device.json") or {"present": False, "why": "the preflight did not run"}
    figs = Figures()

    b = load(out, "bench_fp32.json")
    why = check_note(status, "bench_fp32", "preflight")
    pre = by_trace(b and b.get("prefill"))
    dec = by_trace(b and b.get("decode"))

    def ms(row, key="seconds"):
        return row[key] * 1e3 if row and row.get(key) is not None else None

    figs.add("prefill 1,024 tokens, tracing off", ms(pre.get(False)), "ms", TARGET_PREFILL_1024_MS, why=why)
    figs.add("prefill 1,024 tokens, attention + residuals traced", ms(pre.get(True)), "ms",
             TARGET_PREFILL_1024_TRACED_MS, why=why)
    for trace, target, label in ((False, TARGET_DECODE_UNTRACED_MS, "tracing off"),
                                 (True, TARGET_DECODE_TRACED_MS, "attention + residuals traced")):
        d = dec.get(trace)
        figs.add(f"decode step, 1 lane, context 64, {label} (median)", d and d.get("ms_per_step_median"), "ms",
                 target, bound=d and d.get("memory_bound_ms"), why=why)
    lanes = {row["lanes"]: row for row in (b or {}).get("lanes", [])}
    for k in (1, 2, 4, 8):
        row = lanes.get(k)
        figs.add(f"decode step, {k} lane{'s' if k > 1 else ''}", row and row.get("ms_per_step"), "ms", why=why)
    figs.add("8 lanes / 1 lane", lanes.get(8) and lanes[8].get("ratio_to_one_lane"), "x", TARGET_8_LANES_RATIO,
             why=why)

    h = load(out, "bench_bf16.json")
    hw = check_note(status, "bench_bf16", "preflight")
    hd = by_trace(h and h.get("decode")).get(False)
    figs.add("decode step, bf16 weights, 1 lane, context 64, tracing off (median)",
             hd and hd.get("ms_per_step_median"), "ms", bound=hd and hd.get("memory_bound_ms"), why=hw)
    d32 = dec.get(False)
    ratio = None
    if hd and d32 and hd.get("ms_per_step_median") and d32.get("ms_per_step_median"):
        ratio = hd["ms_per_step_median"] / d32["ms_per_step_median"]
    figs.add("bf16 decode step / fp32 decode step", ratio, "x", why=hw)
    # The same checkpoint in f32, bf16 and f16, their steps taken in turn in
    # one run (bench --formats): ratios that do not depend on two runs' clocks.
    hs = load(out, "bench_formats16.json")
    side = {row.get("weights"): row for row in ((hs or {}).get("formats") or {}).get("formats", [])}
    for f in ("bf16", "f16"):
        row = side.get(f)
        figs.add(f"{f} decode step / fp32 decode step, in turn in one run (median of the pairs)",
                 row and row.get("ratio_to_first_paired_median"), "x",
                 why=check_note(status, "bench_formats16", "preflight"))

    c = load(out, "bench_ctx1000.json")
    d = by_trace(c and c.get("decode")).get(False)
    figs.add("decode step, 1 lane, context 1000, tracing off (median)", d and d.get("ms_per_step_median"), "ms",
             bound=d and d.get("memory_bound_ms"), why=check_note(status, "bench_ctx1000", "preflight"))
    t = load(out, "bench_tf32.json")
    p = by_trace(t and t.get("prefill")).get(False)
    figs.add("prefill 1,024 tokens, TF32 matmuls, tracing off", ms(p), "ms", TARGET_PREFILL_1024_MS,
             why=check_note(status, "bench_tf32", "preflight"))
    g = load(out, "bench_no_graphs.json")
    d = by_trace(g and g.get("decode")).get(False)
    figs.add("decode step, context 64, CUDA graphs off (median)", d and d.get("ms_per_step_median"), "ms",
             why=check_note(status, "bench_no_graphs", "preflight"))

    peer = load(out, "peer.json")
    pw = check_note(status, "peer", "preflight")
    figs.add("TokenScope tokens/s / HF generate tokens/s (engine time)",
             peer and peer.get("tokens_per_second_ratio_engine"), "x", TARGET_HF_SPEEDUP, better="higher", why=pw)
    figs.add("logits vs HF transformers, max abs difference", peer and peer.get("logits_max_abs_diff"), "",
             TARGET_LOGITS_DIFF, why=pw)

    tests = gtest_results(load(out, "gpu_tests.json"))
    tests.update({k: v for k, v in gtest_results(load(out, "tf32_tests.json")).items() if v != NOT_RUN})

    def test_result(name, check="gpu_tests"):
        return tests.get(name, check_note(status, check, "preflight"))

    bench_device = next((x.get("device_after_run") or x.get("device") for x in (b, c, t, g) if x), None)
    graphs = NOT_RUN
    if b and b.get("device_after_run"):
        s = b["device_after_run"]
        graphs = s[s.find("decode graphs"):].rstrip(")") if "decode graphs" in s else s
    report = {
        "device": device,
        "backend_device": bench_device or NOT_RUN,
        "cuda_graphs": graphs,
        "checks": status,
        "phase_seconds": timings,
        "total_seconds": sum(timings.values()),
        "figures": figs.rows,
        "parity_tests": {
            "CPU vs CUDA, GPT-2 124M shape, 1,000-token context (logits <= 1e-3)":
                test_result("CudaBackend.MatchesTheCpuAtGpt2SmallSizeWithAThousandTokenContext"),
            "TF32 vs CPU (logits within the derived TF32 tolerance)":
                test_result("CudaBackend.Tf32MatchesTheCpuAtItsOwnTolerance"),
            "decode across context buckets vs CPU": test_result("CudaBackend.DecodeAcrossContextBucketsEqualsTheCpu"),
            "graph replay == eager across buckets": test_result("CudaBackend.DecodeGraphReplayEqualsEagerAcrossBuckets"),
        },
        "gpu_tests": tests,
    }
    if b:
        report["bench_bounds"] = b.get("machine")
    if peer:
        report["peer"] = {k: v for k, v in peer.items() if not isinstance(v, (list, dict))}
        if isinstance(peer.get("first_divergence"), dict):
            report["peer"]["first_divergence"] = peer["first_divergence"]
    report["failed"] = [k for k, v in status.items() if v["result"].startswith("FAILED")]
    return report


def fmt(x):
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return f"{x:.4g}"
    return "" if x is None else str(x)


def markdown(report):
    device = report["device"]
    md = ["# TokenScope GPU check", ""]
    if device.get("present"):
        md.append(f"Device: {device['name']}, compute capability {device['compute_capability']}, "
                  f"driver {device['driver']} (CUDA {device.get('driver_cuda_version', '?')}), {device['memory']}")
    else:
        md.append(f"Device: none ({device.get('why', '')})")
    md += [f"CUDA libraries the binaries resolve: {device.get('cuda_runtime_resolved', NOT_RUN)}",
           f"Bundle loads: {fmt(device.get('bundle_loads', NOT_RUN))}"
           + (f" ({device['bundle_problem']})" if device.get("bundle_problem") else ""),
           f"Backend: {report['backend_device']}",
           f"CUDA graphs (decode): {report['cuda_graphs']}", ""]
    m = report.get("bench_bounds")
    if m and m.get("read_bandwidth_gb_per_s") is not None:
        md += [f"Bounds measured in the same run on the device: copy bandwidth {m['read_bandwidth_gb_per_s']:.0f} GB/s, "
               f"SGEMM {fmt(m.get('peak_gflops'))} GFLOP/s", ""]
    md += ["## Phases", "", "| phase | seconds |", "|---|---|"]
    md += [f"| {k} | {fmt(v)} |" for k, v in report["phase_seconds"].items()]
    md += [f"| total | {fmt(report['total_seconds'])} |", ""]
    md += ["## Checks", "", "| check | result | detail | seconds |", "|---|---|---|---|"]
    for k, v in report["checks"].items():
        md.append(f"| {k} | {v['result']} | {v.get('detail', '')} | {fmt(v.get('seconds'))} |")
    md += ["", "## Figures", "", "| figure | value | target | meets | bound | ratio to bound |",
           "|---|---|---|---|---|---|"]
    for f in report["figures"]:
        if f["value"] == NOT_RUN:
            val = NOT_RUN + (f" ({f['why']})" if f.get("why") and f["why"] != NOT_RUN else "")
        else:
            val = f"{fmt(f['value'])} {f['unit']}".strip()
        meets = "" if "meets_target" not in f else ("yes" if f["meets_target"] else "NO")
        md.append(f"| {f['name']} | {val} | {fmt(f.get('target'))} | {meets} | {fmt(f.get('bound'))} | "
                  f"{fmt(f.get('ratio_to_bound'))} |")
    md += ["", "## Parity tests", "", "| test | result |", "|---|---|"]
    md += [f"| {k} | {v} |" for k, v in report["parity_tests"].items()]
    if report.get("peer"):
        md += ["", "## HF transformers peer", "", "| | |", "|---|---|"]
        md += [f"| {k} | {fmt(v)} |" for k, v in report["peer"].items()]
    md += ["", "Failed: " + (", ".join(report["failed"]) if report["failed"] else "nothing"), ""]
    return "\n".join(md)


def write(out):
    report = build_report(out)
    for name, text in (("report.json", json.dumps(report, indent=1)), ("report.md", markdown(report))):
        tmp = os.path.join(out, name + ".tmp")
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, os.path.join(out, name))
    return report


if __name__ == "__main__":
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        sys.exit("usage: report.py OUT (the gpu-check output folder)")
    write(sys.argv[1])
