// The window's code that needs no display: its command line and --help, the
// Lanes panel's presets, the text helpers and the roof probes' combination.
// Its own binary (ts_app_tests, no ctest label gui): these run everywhere the
// window builds, without Xvfb and without waiting for the serial GUI tests.
#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <vector>

#include "app/analysis.h"
#include "app/app_options.h"
#include "app/layout.h"
#include "app/panels/lanes.h"
#include "app/view_model.h"
#include "sampling/sampling_params.h"
#include "util/error.h"

namespace ts::app {
namespace {

TEST(ViewModel, TextSoFarShowsWhitespaceAtItsEdges) {
  EXPECT_EQ(visible_edges("   "), "\u2423\u2423\u2423");
  EXPECT_EQ(visible_edges("  a b \n"), "\u2423\u2423a b\u2423\u21B5");
  EXPECT_EQ(visible_edges("plain text"), "plain text");
  EXPECT_EQ(visible_edges(""), "");
}

TEST(Analysis, RoofProbesThatDisagreeAreReportedAndTheBestIsKept) {
  HardwareRoofs a, b;
  a.peak_flops = 82e9;
  a.bandwidth = 7e9;
  b.peak_flops = 250e9;
  b.bandwidth = 7.5e9;
  std::string warning;
  HardwareRoofs r = combine_roof_probes({a, b}, warning);
  EXPECT_EQ(r.peak_flops, 250e9);
  EXPECT_EQ(r.bandwidth, 7.5e9);
  EXPECT_NE(warning.find("82\u2013250 GFLOP/s"), std::string::npos) << warning;
  EXPECT_EQ(warning.find("GB/s"), std::string::npos) << warning;  // bandwidth agreed
  b.peak_flops = 90e9;
  r = combine_roof_probes({a, b}, warning);
  EXPECT_EQ(r.peak_flops, 90e9);
  EXPECT_TRUE(warning.empty()) << warning;
}

// Every name --layout accepts is in --help (the quiz, score and guided
// panels were missing from a hand-kept list).
TEST(AppCommandLine, HelpNamesEveryLayout) {
  const std::string help = app_help();
  for (const std::string& name : layout_names()) {
    bool found = false;
    for (size_t at = help.find(name); at != std::string::npos; at = help.find(name, at + 1)) {
      const auto boundary = [&](size_t i) {
        return i >= help.size() || !(std::isalnum(static_cast<unsigned char>(help[i])) != 0 ||
                                     help[i] == '-' || help[i] == '_');
      };
      if ((at == 0 || boundary(at - 1)) && boundary(at + name.size())) found = true;
    }
    EXPECT_TRUE(found) << name;
  }
}

// The --help text names every flag the parser accepts.
TEST(AppCommandLine, HelpDocumentsEveryFlag) {
  const std::string help = app_help();
  for (const char* flag : {"--model",          "--tokenizer",        "--device",
                           "--threads",        "--prompt",           "--strategy",
                           "--max-new-tokens", "--screenshot",       "--steps",
                           "--rechoose",       "--layout",           "--width",
                           "--height",         "--presentation",     "--theme",
                           "--colormap",       "--log-scale",        "--layer",
                           "--head",           "--average-heads",    "--query",
                           "--lane",           "--bench-frames",     "--bench-size",
                           "--config-dir",     "--no-save-layout",   "--hidden",
                           "--help",           "--compare-precision"})
    EXPECT_NE(help.find(flag), std::string::npos) << flag;
  const char* argv[] = {"tokenscope", "--screenshot",       "x.png",      "--steps",
                        "3",          "--layout=attention", "--strategy", "top_p=0.9"};
  const AppOptions o = parse_app_options(8, argv);
  EXPECT_EQ(o.screenshot, "x.png");
  EXPECT_EQ(o.steps, 3);
  EXPECT_EQ(o.layout, "attention");
  const char* bad[] = {"tokenscope", "--strategy", "top_p=7"};
  EXPECT_THROW(parse_app_options(3, bad), Error);
}

// "Add a lane" offers DoLa: both presets parse to DoLa lanes.
TEST(LanesPanel, AddALaneOffersDolaPresets) {
  int dola = 0;
  for (const auto& [label, strategy] : lane_presets()) {
    const SamplingParams p = parse_strategy(strategy);
    if (p.dola()) {
      ++dola;
      EXPECT_EQ(label.rfind("DoLa", 0), 0u) << label;
    }
  }
  EXPECT_EQ(dola, 2);
}

TEST(AppCommandLine, OpenFlagTakesNoModelOrSessionFlag) {
  auto parse = [](std::vector<const char*> args) {
    args.insert(args.begin(), "tokenscope");
    return parse_app_options(static_cast<int>(args.size()), args.data());
  };
  EXPECT_EQ(parse({"--open", "s.json"}).open, "s.json");
  EXPECT_EQ(parse({"--open=s.json", "--layout", "compare", "--steps", "3"}).steps, 3);
  for (const char* flag : {"--model", "--prompt", "--strategy", "--json"}) {
    try {
      parse({"--open", "s.json", flag, "greedy"});
      ADD_FAILURE() << flag << " was accepted with --open";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                std::string("--open and ") + flag +
                    " do not combine: a reopened session shows what its file recorded, without "
                    "the model");
    }
  }
  EXPECT_THROW(parse({"--open", ""}), Error);
  EXPECT_NE(app_help().find("--open FILE"), std::string::npos);
}

// The window reads strategies and repeated flags as tokenscope-cli does.
AppOptions parse_args(std::vector<const char*> args) {
  args.insert(args.begin(), "tokenscope");
  return parse_app_options(static_cast<int>(args.size()), args.data());
}

std::string refusal(std::vector<const char*> args) {
  try {
    parse_args(std::move(args));
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

TEST(AppCommandLine, ASeedWithoutSamplingIsRefusedAsInTheCli) {
  EXPECT_EQ(refusal({"--strategy", "greedy,seed=1"}),
            "--strategy \"greedy,seed=1\": seed needs a sampling key (temperature, top_k, top_p "
            "or min_p): greedy decoding draws nothing");
  for (const char* s : {"beams=4,seed=2", "contrastive=4,seed=3", "spec=4,seed=1"})
    EXPECT_NE(refusal({"--strategy", s}).find("seed needs a sampling key"), std::string::npos) << s;
  EXPECT_NE(refusal({"--compare", "greedy", "beams=2,seed=1"})
                .find("--compare \"beams=2,seed=1\": seed needs a sampling key"),
            std::string::npos);
  EXPECT_NE(refusal({"--rechoose", "greedy,seed=5"}).find("seed needs a sampling key"),
            std::string::npos);
  // With a sampling key the seed draws: accepted.
  EXPECT_EQ(parse_args({"--strategy", "top_p=0.9,seed=1"}).strategy, "top_p=0.9,seed=1");
  EXPECT_EQ(parse_args({"--compare", "greedy", "temperature=0.7,seed=2"}).compare.size(), 2u);
}

TEST(AppCommandLine, ARepeatedFlagIsRefused) {
  EXPECT_EQ(refusal({"--prompt", "a", "--prompt", "b"}), "--prompt is given twice");
  EXPECT_EQ(refusal({"--steps", "1", "--steps=2"}), "--steps is given twice");
  EXPECT_EQ(refusal({"--hidden", "--hidden"}), "--hidden is given twice");
  EXPECT_EQ(refusal({"--model", "m", "--model", "n"}), "--model is given twice");
  EXPECT_EQ(refusal({"--compare", "greedy", "--compare", "top_k=3"}), "--compare is given twice");
  EXPECT_EQ(parse_args({"--layer", "1", "--head", "2"}).head, 2);
}

}  // namespace
}  // namespace ts::app
