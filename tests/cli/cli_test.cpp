// End-to-end tests of tokenscope-cli: the binary is run as a user runs it and
// its exit code, standard output and standard error are checked.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Single quotes survive anything but a single quote, which the shell spells '\''.
std::string shell_quote(const std::string& arg) {
  std::string q = "'";
  for (char c : arg) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

fs::path scratch_root() {
  return fs::temp_directory_path() / ("ts_cli_test_" + std::to_string(::getpid()));
}

// One directory per test for the CLI's output files, all removed at exit.
fs::path scratch_dir() {
  const fs::path dir =
      scratch_root() / ::testing::UnitTest::GetInstance()->current_test_info()->name();
  fs::create_directories(dir);
  return dir;
}

class RemoveScratch : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(scratch_root(), ignored);
  }
};
const auto* const kRemoveScratch = ::testing::AddGlobalTestEnvironment(new RemoveScratch);

CliRun run_cli(const std::vector<std::string>& args) {
  const fs::path dir = scratch_dir();
  std::string cmd = shell_quote(TS_CLI_PATH);
  // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on " " + string.
  for (const auto& a : args) cmd.append(" ").append(shell_quote(a));
  cmd.append(" >").append(shell_quote((dir / "out").string()));
  cmd.append(" 2>").append(shell_quote((dir / "err").string()));
  const int status = std::system(cmd.c_str());
  CliRun r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_file(dir / "out");
  r.err = read_file(dir / "err");
  return r;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// The fixture model (2 layers, context 64) keeps every run quick.
std::vector<std::string> with_tiny(std::vector<std::string> args) {
  args.insert(args.begin(), {"--model", std::string(TS_FIXTURE_DIR) + "/tiny"});
  return args;
}

// Standard error minus the CPU fallback notice printed on machines without a GPU.
std::vector<std::string> error_lines(const CliRun& r) {
  std::vector<std::string> out;
  for (auto& l : lines_of(r.err))
    if (!starts_with(l, "note: ")) out.push_back(l);
  return out;
}

TEST(Cli, HelpListsTheOptionsAndSucceeds) {
  const CliRun r = run_cli({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* option : {"--model", "--prompt", "--steps", "--strategy", "--compare",
                             "--no-kv-cache", "--json", "--logit-lens", "--eval-loss"})
    EXPECT_NE(r.out.find(option), std::string::npos) << option;
}

// Every kind of bad input: exit code 2 and exactly one line that says what is wrong.
TEST(Cli, BadInputGivesOneLineAndExitCodeTwo) {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::string long_prompt(2000, 'x');
  const std::vector<Case> cases = {
      {{"--bogus"}, "unknown option '--bogus'"},
      {with_tiny({"--steps", "-3"}), "--steps"},
      {with_tiny({"--steps", "many"}), "--steps"},
      {with_tiny({"--top-p", "1.5"}), "top"},
      {with_tiny({"--temperature", "0"}), "temperature"},
      {with_tiny({"--strategy", "top_p=7"}), "top_p must be in (0, 1]"},
      {with_tiny({"--strategy", "colour=blue"}), "colour"},
      {with_tiny({"--compare", "greedy", "beams=99"}), "beams=99"},
      {with_tiny({"--prompt", ""}), "prompt is empty"},
      {with_tiny({"--prompt", long_prompt}), "context holds 64"},
      {{"--model", "/nonexistent/model"}, "/nonexistent/model"},
      {with_tiny({"--eval-loss", "/nonexistent/text.txt"}), "/nonexistent/text.txt"},
  };
  for (const Case& c : cases) {
    const CliRun r = run_cli(c.args);
    std::string joined;
    for (const auto& a : c.args) joined += a.size() > 40 ? " <long>" : " " + a;
    EXPECT_EQ(r.exit_code, 2) << joined << "\n" << r.err;
    const std::vector<std::string> errs = error_lines(r);
    ASSERT_EQ(errs.size(), 1u) << joined << "\n" << r.err;
    EXPECT_TRUE(starts_with(errs[0], "tokenscope-cli: ")) << errs[0];
    EXPECT_NE(errs[0].find(c.says), std::string::npos) << joined << "\n" << errs[0];
  }
}

// The quiet text, the JSON export and the compare column of the same greedy
// run come from three code paths: they must agree token for token.
TEST(Cli, GreedyTextJsonAndCompareLaneAgree) {
  const fs::path json_path = scratch_dir() / "session.json";
  const CliRun quiet =
      run_cli(with_tiny({"--steps", "6", "--quiet", "--json", json_path.string()}));
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  const std::vector<std::string> quiet_lines = lines_of(quiet.out);
  ASSERT_EQ(quiet_lines.size(), 1u) << quiet.out;

  const nlohmann::json session = nlohmann::json::parse(read_file(json_path));
  ASSERT_EQ(session["lanes"].size(), 1u);
  const auto& lane = session["lanes"][0];
  EXPECT_EQ(lane["generated"].size(), 7u);  // the prefill's token + 6 decode steps
  const std::string text = lane["text"].get<std::string>();
  EXPECT_TRUE(starts_with(quiet_lines[0], "Today's weather is so" + text)) << quiet_lines[0];
  EXPECT_EQ(session["steps"].size(), 7u);

  const CliRun compare =
      run_cli(with_tiny({"--steps", "6", "--compare", "greedy", "temperature=1.5,seed=7"}));
  ASSERT_EQ(compare.exit_code, 0) << compare.err;
  const std::string greedy_line = "lane 0 (greedy): Today's weather is so" + text;
  EXPECT_NE(compare.out.find(greedy_line), std::string::npos) << compare.out;
  EXPECT_NE(compare.out.find("lane 1 ("), std::string::npos) << compare.out;
}

// --compare prints a header with one column per lane, one row per step and a
// summary row per lane whose perplexity is exp(-log-prob / tokens).
TEST(Cli, CompareColumnsRowsAndSummary) {
  const CliRun r =
      run_cli(with_tiny({"--steps", "4", "--compare", "greedy", "top_k=5,seed=1", "beams=3"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = lines_of(r.out);
  int header = -1, rows = 0, summary = -1;
  for (int i = 0; i < static_cast<int>(lines.size()); ++i) {
    const std::string& l = lines[i];
    if (starts_with(l, "step ")) header = i;
    if (starts_with(l, "prefill ") ||
        (!l.empty() && std::isdigit(static_cast<unsigned char>(l[0])) &&
         l.find('|') != std::string::npos))
      ++rows;
    if (starts_with(l, "lane  strategy")) summary = i;
  }
  ASSERT_GE(header, 0) << r.out;
  EXPECT_NE(lines[header].find("0: greedy"), std::string::npos);
  EXPECT_NE(lines[header].find("2: beams 3"), std::string::npos);
  EXPECT_EQ(rows, 5) << r.out;  // prefill + 4 decode steps
  ASSERT_GE(summary, 0) << r.out;
  for (int lane = 0; lane < 3; ++lane) {
    ASSERT_LT(summary + 1 + lane, static_cast<int>(lines.size()));
    std::istringstream row(lines[summary + 1 + lane]);
    int id = -1;
    row >> id;
    EXPECT_EQ(id, lane);
    // The strategy may be several words: read up to the first number after it.
    std::vector<std::string> fields;
    for (std::string f; row >> f;) fields.push_back(f);
    int at = -1;
    for (int i = 1; i + 2 < static_cast<int>(fields.size()); ++i)
      if (fields[i] == "5" && fields[i + 1].find('.') != std::string::npos) {
        at = i;
        break;
      }
    ASSERT_GE(at, 0) << lines[summary + 1 + lane];
    const int tokens = std::stoi(fields[at]);
    const double log_prob = std::stod(fields[at + 1]);
    const double perplexity = std::stod(fields[at + 2]);
    EXPECT_LT(log_prob, 0.0);
    EXPECT_NEAR(perplexity, std::exp(-log_prob / tokens), 0.01 * perplexity + 0.01)
        << lines[summary + 1 + lane];
  }
}

// Cache off recomputes every step but must choose the same tokens.
TEST(Cli, NoKvCacheChoosesTheSameTokens) {
  const CliRun on = run_cli(with_tiny({"--steps", "8", "--quiet"}));
  const CliRun off = run_cli(with_tiny({"--steps", "8", "--quiet", "--no-kv-cache"}));
  ASSERT_EQ(on.exit_code, 0) << on.err;
  ASSERT_EQ(off.exit_code, 0) << off.err;
  EXPECT_EQ(on.out, off.out);
}

// The logit lens prints the embedding row and one row per layer; the last
// layer's row is the step's own top-5.
TEST(Cli, LogitLensHasARowPerLayerEndingAtTheModelsTop) {
  const CliRun r = run_cli(with_tiny({"--steps", "1", "--logit-lens"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = lines_of(r.out);
  int blocks = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find("chose \"") == std::string::npos) continue;
    const std::string top = lines[i].substr(lines[i].find("top: ") + 5);
    ASSERT_LT(i + 4, lines.size());
    EXPECT_NE(lines[i + 1].find("logit lens"), std::string::npos);
    EXPECT_NE(lines[i + 2].find("embed"), std::string::npos);
    EXPECT_NE(lines[i + 3].find("L1"), std::string::npos);
    ASSERT_NE(lines[i + 4].find("L2"), std::string::npos);
    EXPECT_NE(lines[i + 4].find(top), std::string::npos) << lines[i + 4] << " vs " << top;
    ++blocks;
  }
  EXPECT_EQ(blocks, 2) << r.out;  // prefill and one decode step
}

// --eval-loss prints one JSON object; every token after the first is predicted once.
TEST(Cli, EvalLossPrintsOneJsonRecord) {
  const fs::path text = scratch_dir() / "text.txt";
  std::ofstream(text) << "The old man walked into the street and looked at the sky. "
                         "It was going to rain, he said, and went back inside.\n";
  const CliRun r = run_cli(with_tiny({"--eval-loss", text.string()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json result = nlohmann::json::parse(r.out);
  EXPECT_EQ(result["predictions"].get<int>(), result["tokens"].get<int>() - 1);
  EXPECT_EQ(result["window"].get<int>(), 64);
  const double loss = result["mean_loss_nats"].get<double>();
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_GT(loss, 0.0);
}

}  // namespace
