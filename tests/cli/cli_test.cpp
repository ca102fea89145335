// End-to-end tests of tokenscope-cli: the binary is run as a user runs it and
// its exit code, standard output and standard error are checked.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
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

// The program at `exe` run with `args`, standard input from `stdin_text`
// when given (else the terminal's, never read by these runs).
CliRun run_program(const std::string& exe, const std::vector<std::string>& args,
                   const std::string* stdin_text = nullptr, const fs::path& cwd = {}) {
  const fs::path dir = scratch_dir();
  std::string cmd;
  if (!cwd.empty()) cmd.append("cd ").append(shell_quote(cwd.string())).append(" && ");
  cmd.append(shell_quote(exe));
  // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on " " + string.
  for (const auto& a : args) cmd.append(" ").append(shell_quote(a));
  cmd.append(" >").append(shell_quote((dir / "out").string()));
  cmd.append(" 2>").append(shell_quote((dir / "err").string()));
  if (stdin_text) {
    std::ofstream(dir / "in", std::ios::binary) << *stdin_text;
    cmd.append(" <").append(shell_quote((dir / "in").string()));
  }
  const int status = std::system(cmd.c_str());
  CliRun r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_file(dir / "out");
  r.err = read_file(dir / "err");
  return r;
}

CliRun run_cli(const std::vector<std::string>& args) { return run_program(TS_CLI_PATH, args); }

// tokenscope-bench is built beside tokenscope-cli.
fs::path bench_path() { return fs::path(TS_CLI_PATH).parent_path() / "tokenscope-bench"; }

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

// True when `s` is well-formed UTF-8 (no stray, cut, overlong or surrogate
// sequences), what `iconv -f utf-8` accepts.
bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    int len = 0;
    uint32_t cp = 0;
    if (b < 0x80) {
      ++i;
      continue;
    } else if ((b & 0xE0) == 0xC0) {
      len = 2, cp = b & 0x1F;
    } else if ((b & 0xF0) == 0xE0) {
      len = 3, cp = b & 0x0F;
    } else if ((b & 0xF8) == 0xF0) {
      len = 4, cp = b & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (int k = 1; k < len; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

// --quiet prints what --json holds: valid UTF-8, a character cut between
// tokens as U+FFFD, never the raw bytes (the fixture's byte-level tokens cut
// characters often when sampled hot).
// A session file of lookahead and prompt-lookup lanes keeps each pass whole
// in its replay records, so it is written without a note: the window
// re-opens it.
TEST(Cli, JsonOfLookaheadLanesKeepsEachPassForReopening) {
  const fs::path file = scratch_dir() / "passes.json";
  const CliRun r = run_cli(with_tiny({"--steps", "2", "--compare", "greedy", "lookahead",
                                      "prompt_lookup", "--json", file.string()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("note: " + file.string()), std::string::npos) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(read_file(file));
  ASSERT_GE(doc["steps"].size(), 2u);
  for (int lane : {1, 2}) {
    SCOPED_TRACE("lane " + std::to_string(lane));
    const nlohmann::json& rec = doc["steps"][1]["replay"]["lanes"][lane];
    ASSERT_TRUE(rec.contains("lookahead"));
    const nlohmann::json& pass = rec["lookahead"];
    EXPECT_EQ(pass["prompt_lookup"], lane == 2);
    EXPECT_EQ(pass["layout"]["tokens"], rec["input_tokens"]);
    EXPECT_EQ(pass["committed"], doc["steps"][1]["lanes"][lane]["lookahead"]["committed"]);
    EXPECT_EQ(pass["logits"].size(), pass["verdict"]["committed"].size());
  }
}

// --compare's p is the chosen token's probability in the distribution the
// lane chose from: for a DoLa lane the contrast's, the number the window's
// Lanes panel shows (the record's chosen_prob, which the file keeps).
TEST(Cli, CompareShowsTheProbabilityTheLaneChoseFrom) {
  const fs::path file = scratch_dir() / "compare_p.json";
  const CliRun r = run_cli(
      with_tiny({"--steps", "3", "--compare", "greedy", "dola=1", "--json", file.string()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("p: the chosen token's probability in the distribution its lane chose "
                       "from (after the lane's filters; DoLa: the contrast's)"),
            std::string::npos)
      << r.out;
  const nlohmann::json doc = nlohmann::json::parse(read_file(file));
  int checked = 0;
  for (const std::string& line : lines_of(r.out)) {
    const bool prefill = starts_with(line, "prefill ");
    if (!prefill && (line.empty() || !std::isdigit(static_cast<unsigned char>(line[0])) ||
                     line.find('|') == std::string::npos))
      continue;
    const int step = prefill ? 0 : std::stoi(line);
    // The DoLa lane's cell: "\"piece\" 0.123 L1".
    const size_t mark = line.rfind(" L1");
    ASSERT_NE(mark, std::string::npos) << line;
    const size_t number = line.rfind(' ', mark - 1) + 1;
    const std::string shown = line.substr(number, mark - number);
    const nlohmann::json& rec = doc["steps"][step]["replay"]["lanes"][1];
    ASSERT_EQ(rec["lane"], 1);
    char want[32];
    std::snprintf(want, sizeof want, "%.3f", rec["chosen_prob"].get<double>());
    EXPECT_EQ(shown, want) << line;
    ++checked;
  }
  EXPECT_EQ(checked, 4) << r.out;  // prefill + 3 decode steps
}

TEST(Cli, QuietTextIsValidUtf8AsInTheJson) {
  const fs::path file = scratch_dir() / "quiet.json";
  const CliRun r = run_cli(with_tiny({"--quiet", "--steps", "20", "--strategy",
                                      "temperature=1.5,seed=1", "--json", file.string()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(read_file(file));
  const std::string text = doc.at("lanes").at(0).at("text").get<std::string>();
  // The run cuts a character: the test shows the conversion, not its absence.
  ASSERT_NE(text.find("\xEF\xBF\xBD"), std::string::npos) << text;
  EXPECT_TRUE(valid_utf8(r.out)) << r.out;
  // The printed line: prompt and text as the JSON has them, control
  // characters written \xNN, then the stop reason.
  std::string expected;
  for (char ch : doc.at("prompt").get<std::string>() + text) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      expected += buf;
    } else {
      expected += ch;
    }
  }
  expected += "   [" + doc.at("lanes").at(0).at("stop_reason").get<std::string>() + "]\n";
  EXPECT_EQ(r.out, expected);
}

TEST(Cli, HelpListsTheOptionsAndSucceeds) {
  const CliRun r = run_cli({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* option :
       {"--model", "--prompt", "--steps", "--strategy", "--compare", "--no-kv-cache", "--json",
        "--logit-lens", "--eval-loss", "--compare-precision"})
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

// --eval-loss takes --kv: the loss is then the model's with its keys and
// values held in that format (rounded once, when appended), close to f32's
// and not equal to it.
TEST(Cli, EvalLossTakesTheKvFormat) {
  const fs::path text = scratch_dir() / "text-kv.txt";
  std::ofstream(text) << "The old man walked into the street and looked at the sky. "
                         "It was going to rain, he said, and went back inside.\n";
  const CliRun f32 = run_cli(with_tiny({"--eval-loss", text.string()}));
  const CliRun f16 = run_cli(with_tiny({"--eval-loss", text.string(), "--kv", "f16"}));
  ASSERT_EQ(f32.exit_code, 0) << f32.err;
  ASSERT_EQ(f16.exit_code, 0) << f16.err;
  const double a = nlohmann::json::parse(f32.out)["mean_loss_nats"].get<double>();
  const double b = nlohmann::json::parse(f16.out)["mean_loss_nats"].get<double>();
  EXPECT_NE(a, b);
  EXPECT_NEAR(a, b, 1e-2);
}

// ------------------------------------------------------------ test models

// The tiny fixture with its context cut to n_ctx (wpe keeps its first n_ctx
// rows), and optionally every position embedding set to NaN (a model whose
// every logit is NaN), or the position embeddings from row huge_from on set
// to 3e38 (finite weights whose sums overflow: NaN logits from that position).
fs::path tiny_variant(const std::string& name, int n_ctx, bool nan_positions = false,
                      int huge_from = -1) {
  const fs::path src = fs::path(TS_FIXTURE_DIR) / "tiny";
  const fs::path dir = scratch_dir() / name;
  fs::create_directories(dir);
  for (const char* f : {"vocab.json", "merges.txt"})
    fs::copy_file(src / f, dir / f, fs::copy_options::overwrite_existing);
  nlohmann::json cfg = nlohmann::json::parse(read_file(src / "config.json"));
  const int old_ctx = cfg["n_positions"].get<int>();
  cfg["n_ctx"] = n_ctx;
  cfg["n_positions"] = n_ctx;
  std::ofstream(dir / "config.json") << cfg.dump();

  const std::string st = read_file(src / "model.safetensors");
  uint64_t header_len = 0;
  std::memcpy(&header_len, st.data(), 8);
  const nlohmann::json header = nlohmann::json::parse(st.substr(8, header_len));
  const std::string data = st.substr(8 + header_len);
  nlohmann::json out_header = nlohmann::json::object();
  std::string out_data;
  // Same tensors, data in the old order, wpe cut to n_ctx rows.
  std::vector<std::pair<int64_t, std::string>> order;
  for (auto it = header.begin(); it != header.end(); ++it)
    if (it.key() != "__metadata__") order.emplace_back(it.value()["data_offsets"][0], it.key());
  std::sort(order.begin(), order.end());
  for (const auto& [begin, key] : order) {
    nlohmann::json t = header[key];
    const int64_t end = t["data_offsets"][1].get<int64_t>();
    std::string bytes = data.substr(static_cast<size_t>(begin), static_cast<size_t>(end - begin));
    if (key == "wpe.weight") {
      bytes.resize(bytes.size() / old_ctx * n_ctx);
      t["shape"][0] = n_ctx;
      if (nan_positions) {
        const float nan = std::nanf("");
        for (size_t i = 0; i + 4 <= bytes.size(); i += 4) std::memcpy(&bytes[i], &nan, 4);
      }
      if (huge_from >= 0) {
        const float huge = 3e38f;
        const size_t row_bytes = bytes.size() / static_cast<size_t>(n_ctx);
        for (size_t i = row_bytes * static_cast<size_t>(huge_from); i + 4 <= bytes.size(); i += 4)
          std::memcpy(&bytes[i], &huge, 4);
      }
    }
    t["data_offsets"] = {out_data.size(), out_data.size() + bytes.size()};
    out_header[key] = t;
    out_data += bytes;
  }
  std::string h = out_header.dump();
  while (h.size() % 8 != 0) h += ' ';
  std::ofstream out(dir / "model.safetensors", std::ios::binary);
  const uint64_t len = h.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << h << out_data;
  return dir;
}

void expect_one_error_line(const CliRun& r, const std::string& program, const std::string& says,
                           const std::string& what) {
  EXPECT_EQ(r.exit_code, 2) << what << "\n" << r.err;
  const std::vector<std::string> errs = error_lines(r);
  ASSERT_EQ(errs.size(), 1u) << what << "\n" << r.err;
  EXPECT_TRUE(starts_with(errs[0], program + ": ")) << errs[0];
  EXPECT_NE(errs[0].find(says), std::string::npos) << what << "\n" << errs[0];
}

// ---------------------------------------------------------------- the CLI

// More steps than the context holds run to the end of the context (the
// count used to overflow into a single token); beyond int it is refused.
TEST(Cli, HugeStepCountsRunToTheContextEnd) {
  const CliRun r = run_cli(with_tiny({"--steps", "2147483647", "--quiet"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[context end"), std::string::npos) << r.out;
  expect_one_error_line(run_cli(with_tiny({"--steps", "2147483648"})), "tokenscope-cli",
                        "--steps: 2147483648 is out of range, at most 2147483647", "steps");
}

// --compare-precision's header counts its prompt tokens in the right number,
// and the two texts of its summary start in one column although "f32 text:"
// and "bf16 free text:" differ in length.
TEST(Cli, ComparePrecisionTextIsAlignedAndCountedRight) {
  const CliRun r =
      run_cli(with_tiny({"--compare-precision", "f32,bf16", "--prompt", "a", "--steps", "1"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(", 1 prompt token\n"), std::string::npos) << r.out;
  size_t ref_column = std::string::npos, free_column = std::string::npos;
  for (const std::string& line : lines_of(r.out)) {
    if (starts_with(line, "f32 text:")) ref_column = line.find_first_not_of(' ', 9);
    if (starts_with(line, "bf16 free text:")) free_column = line.find_first_not_of(' ', 15);
  }
  ASSERT_NE(ref_column, std::string::npos) << r.out;
  EXPECT_EQ(ref_column, free_column) << r.out;
}

// --compare-precision with more steps than the context holds stops at the
// context's end and says so, as a plain run does, rather than quietly
// printing fewer rows than asked for.
TEST(Cli, ComparePrecisionSaysWhenTheContextEnds) {
  const CliRun r = run_cli(with_tiny({"--compare-precision", "f32,bf16", "--steps", "1000"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[context end: the model holds 64 tokens]"), std::string::npos) << r.out;
  // Within the context, nothing of the kind.
  const CliRun s = run_cli(with_tiny({"--compare-precision", "f32,bf16", "--steps", "2"}));
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(s.out.find("[context end"), std::string::npos) << s.out;
}

// Conflicting strategy flags are refused with one line naming both, in
// whichever order they come.
TEST(Cli, ConflictingFlagsAreRefusedNamingBoth) {
  struct Case {
    std::vector<std::string> args;
    std::string first, second;
  };
  const std::vector<Case> cases = {
      {{"--temperature", "0.5", "--strategy", "top_k=5"}, "--temperature", "--strategy"},
      {{"--greedy", "--temperature", "0.7"}, "--greedy", "--temperature"},
      {{"--temperature", "0.7", "--greedy"}, "--temperature", "--greedy"},
      {{"--seed", "5", "--strategy", "temperature=1,seed=0"}, "--seed", "--strategy"},
      {{"--top-k", "5", "--compare", "greedy", "beams=2"}, "--top-k", "--compare"},
      {{"--compare", "greedy", "--repetition-penalty", "1.2"}, "--compare", "--repetition-penalty"},
      {{"--eval-loss", "x.txt", "--json", "f.json"}, "--eval-loss", "--json"},
      {{"--interactive", "--eval-loss", "x.txt"}, "--eval-loss", "--interactive"},
      {{"--eval-loss", "x.txt", "--compare", "greedy"}, "--eval-loss", "--compare"},
      {{"--interactive", "--quiet"}, "--interactive", "--quiet"},
  };
  for (const Case& c : cases) {
    const CliRun r = run_cli(with_tiny(c.args));
    expect_one_error_line(r, "tokenscope-cli", c.first + " and " + c.second + " conflict",
                          c.first + " " + c.second);
  }
  expect_one_error_line(run_cli(with_tiny({"--top-p", "0.5", "--top-p", "0.9"})), "tokenscope-cli",
                        "--top-p is given twice", "twice");
  // Flags that combine still do.
  EXPECT_EQ(run_cli(with_tiny({"--temperature", "0.7", "--top-k", "5", "--repetition-penalty",
                               "1.2", "--seed", "3", "--steps", "1", "--quiet"}))
                .exit_code,
            0);
  EXPECT_EQ(
      run_cli(with_tiny({"--greedy", "--repetition-penalty", "1.2", "--steps", "1", "--quiet"}))
          .exit_code,
      0);
}

// A seed for a lane that draws nothing is refused the same way whether it
// is --seed or a strategy's seed=N; with a sampling key it is accepted.
TEST(Cli, SeedWithoutSamplingIsRefusedAlike) {
  const std::string why = "greedy decoding draws nothing";
  expect_one_error_line(run_cli(with_tiny({"--seed", "1"})), "tokenscope-cli", why, "--seed");
  for (const std::string s : {"greedy,seed=1", "seed=1", "contrastive=4,alpha=0.6, seed=2",
                              "beams=2,seed=1", "spec=2,seed=1", "dola=low,seed=0"})
    expect_one_error_line(run_cli(with_tiny({"--strategy", s})), "tokenscope-cli", why, s);
  expect_one_error_line(run_cli(with_tiny({"--compare", "top_p=0.9,seed=1", "greedy,seed=1"})),
                        "tokenscope-cli", "--compare \"greedy,seed=1\": seed needs", "compare");
  EXPECT_EQ(
      run_cli(with_tiny({"--strategy", "top_p=0.9,seed=1", "--steps", "1", "--quiet"})).exit_code,
      0);
  EXPECT_EQ(run_cli(with_tiny({"--compare", "greedy", "temperature=0.8,seed=3", "--steps", "1",
                               "--quiet"}))
                .exit_code,
            0);
}

// Every flag given twice is refused naming it, in tokenscope-cli (but
// --score, which compares two continuations) and in tokenscope-bench: the
// second value is never silently taken.
TEST(Cli, EveryFlagGivenTwiceIsRefused) {
  const std::string tiny = std::string(TS_FIXTURE_DIR) + "/tiny";
  const std::string a_json = (scratch_dir() / "a.json").string();
  const std::vector<std::vector<std::string>> cli_cases = {
      {"--json", a_json, "--json", (scratch_dir() / "b.json").string()},
      {"--steps", "1", "--steps", "2"},
      {"--prompt", "a", "--prompt", "b"},
      {"--model", tiny},
      {"--tokenizer", tiny, "--tokenizer", tiny},
      {"--top", "3", "--top", "4"},
      {"--threads", "1", "--threads", "2"},
      {"--device", "cpu", "--device", "cpu"},
      {"--quiet", "--quiet"},
      {"--no-kv-cache", "--no-kv-cache"},
      {"--no-attention", "--no-attention"},
      {"--logit-lens", "--logit-lens"},
      {"--memory", "--memory"},
      {"--interactive", "--interactive"},
      {"--json", a_json, "--json-full-logits", "--json-full-logits"},
      {"--eval-loss", "a.txt", "--eval-loss", "b.txt"},
      {"--eval-loss", "a.txt", "--eval-window", "8", "--eval-window", "9"},
      {"--score", "a", "--top", "2", "--top", "3"},
  };
  for (const auto& args : cli_cases) {
    std::string flag;  // the flag that comes twice
    for (size_t i = 0; i < args.size() && flag.empty(); ++i)
      for (size_t j = i + 1; j < args.size(); ++j)
        if (args[i] == args[j] && starts_with(args[i], "--")) flag = args[i];
    if (flag.empty()) flag = "--model";
    expect_one_error_line(run_cli(with_tiny(args)), "tokenscope-cli", flag + " is given twice",
                          flag);
  }
  // --score is the flag that may come twice.
  EXPECT_EQ(run_cli(with_tiny({"--prompt", "a", "--score", " b", "--score", " c"})).exit_code, 0);
  if (!fs::exists(bench_path())) GTEST_SKIP() << bench_path() << " is not built";
  const std::vector<std::pair<std::vector<std::string>, std::string>> bench_cases = {
      {{"--model", tiny, "--model", tiny}, "--model"},
      {{"--model", tiny, "--context", "8", "--context", "9"}, "--context"},
      {{"--model", tiny, "--lanes", "1", "--lanes", "2"}, "--lanes"},
      {{"--model", tiny, "--device", "cpu", "--device=cpu"}, "--device"},
      {{"--model", tiny, "--threads", "1", "--threads", "1"}, "--threads"},
      {{"--model", tiny, "--decode-steps", "1", "--decode-steps", "2"}, "--decode-steps"},
      {{"--model", tiny, "--prefill-tokens", "1", "--prefill-tokens", "2"}, "--prefill-tokens"},
      {{"--model", tiny, "--cache-compare", "4", "--cache-compare", "5"}, "--cache-compare"},
      {{"--model", tiny, "--spec-self-draft", "--spec-self-draft"}, "--spec-self-draft"},
      {{"--model", tiny, "--cpu-vectors", "auto", "--cpu-vectors", "avx2"}, "--cpu-vectors"},
  };
  for (const auto& [args, flag] : bench_cases)
    expect_one_error_line(run_program(bench_path().string(), args), "tokenscope-bench",
                          flag + " is given twice", flag);
}

// Values that used to be ignored without a word are refused with one line.
TEST(Cli, IgnoredOrEmptyValuesAreRefused) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--eval-loss", "x.txt", "--eval-window", "0"}, "--eval-window: 0 is out of range"},
      {{"--eval-loss", "x.txt", "--eval-window", "-5"}, "--eval-window: -5 is out of range"},
      {{"--eval-window", "8"}, "--eval-window needs --eval-loss"},
      {{"--eval-loss", ""}, "--eval-loss: the value is empty"},
      {{"--json", ""}, "--json: the value is empty"},
      {{"--model", ""}, "--model: the value is empty"},
      {{"--json", "--quiet"}, "--json needs a value, got the option '--quiet'"},
      {{"--json-full-logits"}, "--json-full-logits needs --json"},
      {{"--seed", "3"}, "--seed needs a sampling flag"},
      {{"--quiet=yes"}, "--quiet takes no value"},
      {{"--threads", "100000"}, "--threads: 100000 is out of range, at most"},
      {{"--device", "gpu"}, "--device: expected auto, cpu or cuda"},
  };
  for (const auto& [args, says] : cases) {
    std::vector<std::string> full = args;
    if (args.front() != "--model") full = with_tiny(args);
    std::string joined;
    for (const auto& a : args) joined += " '" + a + "'";
    expect_one_error_line(run_cli(full), "tokenscope-cli", says, joined);
  }
}

// --flag=value means --flag value; --help wins over a bad value beside it.
TEST(Cli, EqualsFormAndHelpFirst) {
  const CliRun spaced = run_cli(with_tiny({"--steps", "3", "--quiet"}));
  const CliRun joined =
      run_cli({"--model=" + std::string(TS_FIXTURE_DIR) + "/tiny", "--steps=3", "--quiet"});
  ASSERT_EQ(spaced.exit_code, 0) << spaced.err;
  ASSERT_EQ(joined.exit_code, 0) << joined.err;
  EXPECT_EQ(spaced.out, joined.out);
  const CliRun help = run_cli({"--help", "--steps", "-1"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_NE(help.out.find("Usage: tokenscope-cli"), std::string::npos);
  EXPECT_NE(help.out.find("Conflicting flags are refused"), std::string::npos);
}

// Beam search on contexts that are small or not a multiple of the KV block
// size: the pool is sized in blocks for every beam's worst case, so the run
// ends at the context instead of failing with "KV cache full" midway.
TEST(Cli, BeamSearchFitsAnyContextLength) {
  for (int n_ctx : {3, 8, 17, 20}) {
    const fs::path model = tiny_variant("ctx" + std::to_string(n_ctx), n_ctx);
    const CliRun r = run_cli({"--model", model.string(), "--prompt", "Hi", "--strategy", "beams=8",
                              "--steps", "200", "--quiet"});
    EXPECT_EQ(r.exit_code, 0) << "n_ctx " << n_ctx << "\n" << r.err;
    EXPECT_EQ(r.err.find("KV cache full"), std::string::npos) << r.err;
    const CliRun lanes = run_cli({"--model", model.string(), "--prompt", "Hi", "--compare",
                                  "beams=8", "beams=4", "greedy", "--steps", "200", "--quiet"});
    EXPECT_EQ(lanes.exit_code, 0) << "n_ctx " << n_ctx << "\n" << lanes.err;
  }
}

// A model whose logits are NaN fails --eval-loss like generation does,
// instead of printing "nan" inside JSON with exit code 0.
TEST(Cli, EvalLossRefusesNaNAndEscapesTheFileName) {
  const fs::path dir = scratch_dir();
  const fs::path text = dir / "a \"quoted\" name\\.txt";
  std::ofstream(text) << "The old man walked into the street and looked at the sky.\n";
  const fs::path nan_model = tiny_variant("nan", 64, true);
  expect_one_error_line(run_cli({"--model", nan_model.string(), "--eval-loss", text.string()}),
                        "tokenscope-cli", "NaN", "nan model");
  expect_one_error_line(run_cli({"--model", nan_model.string(), "--steps", "1"}), "tokenscope-cli",
                        "NaN", "nan model generation");

  const CliRun r = run_cli(with_tiny({"--eval-loss", text.string()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json result = nlohmann::json::parse(r.out);  // throws on bad JSON
  EXPECT_EQ(result["file"].get<std::string>(), text.string());

  expect_one_error_line(run_cli(with_tiny({"--eval-loss", dir.string()})), "tokenscope-cli",
                        "is a directory", "directory");
  expect_one_error_line(run_cli(with_tiny({"--eval-loss", "/dev/zero"})), "tokenscope-cli",
                        "larger than the 64 MiB", "/dev/zero");
}

// Non-finite weights are refused when the model loads, naming the file and
// the tensor (and the draft, when it is the draft), in the CLI and the bench.
TEST(Cli, NonFiniteWeightsAreRefusedAtLoadNamingTheTensor) {
  const fs::path nan_model = tiny_variant("nan", 64, true);
  const std::string st = (nan_model / "model.safetensors").string();
  const std::string says = st + ": tensor wpe.weight holds 4096 NaN values";
  expect_one_error_line(run_cli({"--model", nan_model.string(), "--steps", "1"}), "tokenscope-cli",
                        says, "model");
  expect_one_error_line(run_cli({"--model", nan_model.string(), "--interactive"}), "tokenscope-cli",
                        says, "interactive");
  expect_one_error_line(run_cli(with_tiny({"--strategy", "spec=2", "--draft-model",
                                           nan_model.string(), "--steps", "1"})),
                        "tokenscope-cli", "draft model: " + says, "draft");
  if (!fs::exists(bench_path())) GTEST_SKIP() << bench_path() << " is not built";
  expect_one_error_line(run_program(bench_path().string(), {"--model", nan_model.string()}),
                        "tokenscope-bench", says, "bench");
  expect_one_error_line(
      run_program(bench_path().string(), {"--model", std::string(TS_FIXTURE_DIR) + "/tiny",
                                          "--draft-model", nan_model.string(), "--spec-only"}),
      "tokenscope-bench", "draft model: " + says, "bench draft");
}

// The window (tokenscope, built beside the CLI) treats bad input as the CLI
// does: a DoLa layer the model lacks is refused with one line and exit 2
// before any window opens (no display is needed to see it); a model that
// cannot load (NaN weights) is shown in the window and still exits 2.
TEST(Cli, WindowExitsTwoOnBadInput) {
  const fs::path window = fs::path(TS_CLI_PATH).parent_path() / "tokenscope";
  if (!fs::exists(window)) GTEST_SKIP() << window << " is not built";
  const std::string tiny = std::string(TS_FIXTURE_DIR) + "/tiny";
  expect_one_error_line(
      run_program("env", {"-u", "DISPLAY", "-u", "WAYLAND_DISPLAY", window.string(), "--model",
                          tiny, "--compare", "greedy", "dola=9"}),
      "tokenscope", "--compare \"dola=9\": dola: layer 9 is not a premature layer", "compare");
  expect_one_error_line(
      run_program("env", {"-u", "DISPLAY", "-u", "WAYLAND_DISPLAY", window.string(), "--model",
                          tiny, "--strategy", "dola=5"}),
      "tokenscope", "--strategy \"dola=5\": dola: layer 5", "strategy");
  // Headless too: refused before the hidden window is made.
  expect_one_error_line(
      run_program("env", {"-u", "DISPLAY", "-u", "WAYLAND_DISPLAY", window.string(), "--model",
                          tiny, "--compare", "greedy", "dola=9", "--screenshot",
                          (scratch_dir() / "d.png").string()}),
      "tokenscope", "--compare \"dola=9\": dola: layer 9 is not a premature layer", "screenshot");
  if (std::getenv("DISPLAY") == nullptr) GTEST_SKIP() << "no display for the window";
  const fs::path nan_model = tiny_variant("nan", 64, true);
  const std::string says = "tensor wpe.weight holds 4096 NaN values";
  expect_one_error_line(
      run_program(window.string(), {"--model", nan_model.string(), "--screenshot",
                                    (scratch_dir() / "s.png").string(), "--hidden"}),
      "tokenscope", says, "screenshot");
  // The window runs until SIGTERM closes it, then says why the model is missing.
  expect_one_error_line(
      run_program("timeout", {"--preserve-status", "-s", "TERM", "4", window.string(), "--model",
                              nan_model.string(), "--hidden", "--no-save-layout"}),
      "tokenscope", says, "window");
}

// A step whose logits are NaN although every weight is finite (sums that
// overflow) ends the run like Ctrl-C: the steps before it are printed and
// written to --json FILE, marked interrupted; one line names the step; exit 2.
// --interactive says it once and ends too.
TEST(Cli, StepWithNaNLogitsKeepsTheTraceSoFar) {
  const fs::path model = tiny_variant("huge", 64, false, 6);
  const std::string json_file = (scratch_dir() / "t.json").string();
  const CliRun r =
      run_cli({"--model", model.string(), "--prompt", "The", "--steps", "20", "--json", json_file});
  expect_one_error_line(r, "tokenscope-cli", "stopped at decode step ", "run");
  const std::string err = error_lines(r).at(0);
  EXPECT_NE(err.find("NaN"), std::string::npos) << err;
  const size_t at = err.find("decode step ") + 12;
  const int failed = std::atoi(err.c_str() + at);
  EXPECT_GE(failed, 1) << err;
  EXPECT_NE(err.find(json_file + " keeps the " + std::to_string(failed) + " steps before it"),
            std::string::npos)
      << err;
  ASSERT_TRUE(fs::exists(json_file));
  const nlohmann::json doc = nlohmann::json::parse(read_file(json_file));
  EXPECT_TRUE(doc["interrupted"].get<bool>());
  EXPECT_EQ(doc["steps"].size(), static_cast<size_t>(failed));
  EXPECT_NE(r.out.find("wrote " + json_file + " (marked interrupted)"), std::string::npos) << r.out;

  const std::string enters(30, '\n');
  const CliRun i = run_program(
      TS_CLI_PATH, {"--model", model.string(), "--prompt", "The", "--interactive"}, &enters);
  expect_one_error_line(i, "tokenscope-cli", "stopped at decode step " + std::to_string(failed),
                        "interactive");
  EXPECT_EQ(i.out.find("NaN"), std::string::npos) << i.out;

  const CliRun c = run_cli({"--model", model.string(), "--prompt", "The", "--steps", "20",
                            "--compare", "greedy", "top_k=5,seed=1"});
  expect_one_error_line(c, "tokenscope-cli", "stopped at decode step", "compare");
}

// --json: complete JSON marked not interrupted; a directory or a missing
// parent gives one line with the reason; no temporary file is left behind.
TEST(Cli, JsonFileIsCompleteAndErrorsSayWhy) {
  const fs::path dir = scratch_dir();
  const fs::path file = dir / "s.json";
  std::ofstream(file) << "old content";
  const CliRun r = run_cli(with_tiny({"--steps", "3", "--quiet", "--json", file.string()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(read_file(file));
  EXPECT_EQ(j["interrupted"], false);
  EXPECT_EQ(j["steps"].size(), 4u);
  EXPECT_EQ(j["state"], "finished");
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  expect_one_error_line(run_cli(with_tiny({"--steps", "1", "--json", dir.string()})),
                        "tokenscope-cli", "is a directory", "dir");
  expect_one_error_line(
      run_cli(with_tiny({"--steps", "1", "--json", (dir / "missing" / "x.json").string()})),
      "tokenscope-cli", "No such file or directory", "missing parent");
}

// --json FILE through symbolic links: the link stays a link and the file it
// names gets the trace (a dangling link's target is made); a link to an open
// file (/proc/self/fd/1, what /dev/stdout is) is appended to, never replaced.
// --score's JSON goes the same way.
TEST(Cli, JsonWritesThroughSymbolicLinks) {
  const fs::path dir = scratch_dir();
  fs::create_directories(dir / "sub");
  std::ofstream(dir / "sub" / "target.json") << "old content";
  fs::create_symlink("sub/target.json", dir / "link1");
  fs::create_symlink("link1", dir / "link2");                      // a chain, relative
  fs::create_symlink(dir / "sub" / "new.json", dir / "dangling");  // absolute, to a new file
  fs::create_symlink("/proc/self/fd/1", dir / "stdout");
  for (const char* name : {"link2", "dangling"}) {
    const CliRun r =
        run_cli(with_tiny({"--steps", "1", "--quiet", "--json", (dir / name).string()}));
    ASSERT_EQ(r.exit_code, 0) << name << "\n" << r.err;
    EXPECT_TRUE(fs::is_symlink(dir / name)) << name;
  }
  EXPECT_TRUE(fs::is_symlink(dir / "link1"));
  EXPECT_EQ(nlohmann::json::parse(read_file(dir / "sub" / "target.json"))["steps"].size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(read_file(dir / "sub" / "new.json"))["steps"].size(), 2u);
  for (const auto& e : fs::directory_iterator(dir / "sub"))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();

  // Standard output is a regular file here: the text comes first, then the JSON.
  const CliRun r =
      run_cli(with_tiny({"--steps", "1", "--quiet", "--json", (dir / "stdout").string()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(dir / "stdout"));
  const size_t brace = r.out.find('{');
  ASSERT_NE(brace, std::string::npos) << r.out;
  EXPECT_GT(brace, 0u) << "the generated text comes first";
  EXPECT_EQ(nlohmann::json::parse(r.out.substr(brace))["steps"].size(), 2u);

  const CliRun s =
      run_cli(with_tiny({"--prompt", "a", "--score", " b", "--json", (dir / "link2").string()}));
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_TRUE(fs::is_symlink(dir / "link2"));
  EXPECT_TRUE(nlohmann::json::parse(read_file(dir / "sub" / "target.json")).contains("tokens"))
      << read_file(dir / "sub" / "target.json");
}

// Reads `fd` until its text holds `first` and, after it, `then`; gives up
// after `seconds` without new output or at its end. Returns what was read.
std::string read_until(int fd, const std::string& first, const std::string& then,
                       int seconds = 30) {
  std::string got;
  const auto found = [&] {
    const size_t at = got.find(first);
    return at != std::string::npos && got.find(then, at + first.size()) != std::string::npos;
  };
  char buf[4096];
  while (!found()) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, seconds * 1000) <= 0) break;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

// `sig` sent to --interactive after the prefill ends the session like
// Ctrl-C: exit 128 + sig, the --json file says "interrupted": true and no
// temporary file is left beside it.
void expect_signal_keeps_the_trace(int sig, const std::string& name) {
  const fs::path dir = scratch_dir() / name;
  fs::create_directories(dir);
  const fs::path file = dir / "s.json";
  std::ofstream(file) << "{\"from\": \"an older run\"}";
  int to_child[2], from_child[2];
  ASSERT_EQ(::pipe(to_child), 0);
  ASSERT_EQ(::pipe(from_child), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(to_child[0], 0);
    ::dup2(from_child[1], 1);
    ::close(to_child[1]);
    ::close(from_child[0]);
    const std::string model = std::string(TS_FIXTURE_DIR) + "/tiny";
    const std::string json = file.string();
    ::execl(TS_CLI_PATH, TS_CLI_PATH, "--model", model.c_str(), "--interactive", "--json",
            json.c_str(), static_cast<char*>(nullptr));
    ::_exit(121);
  }
  ::close(to_child[0]);
  ::close(from_child[1]);
  ASSERT_EQ(::write(to_child[1], "\n", 1), 1);  // the prefill
  // The prefill's step line, then the prompt that waits for the next line
  // (its flush carries both: the output is a pipe, fully buffered).
  const std::string shown = read_until(from_child[0], "[prefill]", "[q] quit > ");
  const size_t step_line = shown.find("[prefill]");
  const bool prompted =
      step_line != std::string::npos && shown.find("[q] quit > ", step_line) != std::string::npos;
  // The signal can land after the prompt's flush but before the read that
  // waits for a line starts: it then only sets the flag and the read goes on
  // waiting. So it is sent again until the CLI ends; one that arrives during
  // the read ends it (no SA_RESTART).
  int status = 0;
  bool ended = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (prompted && !ended && std::chrono::steady_clock::now() < deadline) {
    ::kill(pid, sig);
    for (int i = 0; i < 20 && !(ended = ::waitpid(pid, &status, WNOHANG) == pid); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!ended) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    ::close(to_child[1]);
    ::close(from_child[0]);
    FAIL() << (prompted ? "the CLI did not stop on " + name
                        : "no step line and prompt after the prefill: " + shown);
  }
  ::close(to_child[1]);
  ::close(from_child[0]);
  ASSERT_TRUE(WIFEXITED(status)) << name << ": killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 128 + sig) << name;
  const nlohmann::json j = nlohmann::json::parse(read_file(file));
  EXPECT_EQ(j["interrupted"], true) << name;
  EXPECT_EQ(j["steps"].size(), 1u) << name;
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
}

// Ctrl-C in --interactive ends the session; the --json file then says so.
TEST(Cli, InterruptedRunWritesAFileMarkedInterrupted) {
  expect_signal_keeps_the_trace(SIGINT, "SIGINT");
}

// SIGTERM (kill, a closing terminal's session manager) and SIGHUP (the
// terminal gone) stop the run as Ctrl-C does.
TEST(Cli, TermAndHangUpStopLikeCtrlC) {
  expect_signal_keeps_the_trace(SIGTERM, "SIGTERM");
  expect_signal_keeps_the_trace(SIGHUP, "SIGHUP");
}

// The CLI with its standard output a pipe whose reader is gone (`| head -1`
// after its line): exit 0, nothing on stderr, no death by SIGPIPE; the
// --json file is still written, marked interrupted. Plain runs get a pipe
// with no reader at all; an --interactive one's reader closes after the
// prefill, and then a step is asked for.
void expect_closed_output_ends_quietly(const std::vector<std::string>& args, bool interactive) {
  const fs::path dir = scratch_dir() / (interactive ? "interactive" : "plain");
  fs::create_directories(dir);
  const fs::path file = dir / "s.json";
  int out_pipe[2], in_pipe[2];
  ASSERT_EQ(::pipe(out_pipe), 0);
  ASSERT_EQ(::pipe(in_pipe), 0);
  if (!interactive) ::close(out_pipe[0]);  // no reader at all
  const fs::path err_path = dir / "err";
  std::vector<std::string> full = with_tiny(args);
  full.insert(full.end(), {"--json", file.string()});
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(in_pipe[0], 0);
    ::dup2(out_pipe[1], 1);
    ::close(in_pipe[1]);
    if (interactive) ::close(out_pipe[0]);
    const std::string err_s = err_path.string();
    if (!std::freopen(err_s.c_str(), "w", stderr)) ::_exit(120);
    std::vector<char*> argv = {const_cast<char*>(TS_CLI_PATH)};
    for (std::string& a : full) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(TS_CLI_PATH, argv.data());
    ::_exit(121);
  }
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  if (interactive) {
    ASSERT_EQ(::write(in_pipe[1], "\n", 1), 1);  // the prefill
    std::string got;
    char c = 0;
    while (got.find("[prefill]") == std::string::npos && ::read(out_pipe[0], &c, 1) == 1) got += c;
    ::close(out_pipe[0]);  // the reader is gone
    ASSERT_EQ(::write(in_pipe[1], "\n\n", 2), 2);
  }
  int status = 0;
  bool ended = false;
  for (int i = 0; i < 400 && !(ended = ::waitpid(pid, &status, WNOHANG) == pid); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ::close(in_pipe[1]);
  if (!ended) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    FAIL() << "the CLI did not stop when its output was closed";
  }
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  std::string err;
  for (const std::string& l : lines_of(read_file(err_path)))
    if (!starts_with(l, "note: ")) err += l + "\n";
  EXPECT_EQ(err, "");
  const nlohmann::json j = nlohmann::json::parse(read_file(file));
  EXPECT_EQ(j["interrupted"], true);
}

TEST(Cli, ClosedStandardOutputEndsTheRunQuietly) {
  expect_closed_output_ends_quietly({"--steps", "20"}, false);
  expect_closed_output_ends_quietly({"--interactive"}, true);
}

// --json's destination is checked before the model is loaded: nothing is
// printed or generated when it cannot be written.
TEST(Cli, JsonDestinationIsCheckedBeforeGenerating) {
  for (const std::string& file : {std::string("/proc/self/status"),
                                  std::string("/proc/self/trace.json"), std::string("/proc/1")}) {
    const CliRun r = run_cli(with_tiny({"--steps", "3", "--json", file}));
    expect_one_error_line(r, "tokenscope-cli", file + ": ", file);
    EXPECT_EQ(r.out, "") << file;
  }
  const CliRun s = run_cli(with_tiny({"--score", "x", "--json", "/proc/self/status"}));
  expect_one_error_line(s, "tokenscope-cli", "/proc/self/status: ", "score");
  EXPECT_EQ(s.out, "");
}

// The final text escapes control bytes like the step lines; the chosen
// token's probability is printed before and after the filters, the latter
// equal to the JSON's chosen_prob.
TEST(Cli, FinalTextIsEscapedAndBothProbabilitiesPrinted) {
  const CliRun r = run_cli(with_tiny({"--prompt", "\x1b[31mred\x07", "--steps", "1", "--quiet"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos);
  EXPECT_EQ(r.out.find('\x07'), std::string::npos);
  EXPECT_NE(r.out.find("\\x1b[31mred\\x07"), std::string::npos) << r.out;

  const fs::path file = scratch_dir() / "s.json";
  const CliRun s = run_cli(with_tiny({"--temperature", "1.5", "--top-k", "3", "--seed", "4",
                                      "--steps", "0", "--json", file.string()}));
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const size_t at = s.out.find("after filters p ");
  ASSERT_NE(at, std::string::npos) << s.out;
  EXPECT_NE(s.out.find("(model p "), std::string::npos) << s.out;
  const double printed = std::stod(s.out.substr(at + 16, 5));
  const nlohmann::json j = nlohmann::json::parse(read_file(file));
  EXPECT_NEAR(printed, j["steps"][0]["lanes"][0]["chosen_prob"].get<double>(), 0.0006);
}

// --interactive: only Enter steps; anything else says what it accepts; end
// of input ends the prompt line.
TEST(Cli, InteractiveAcceptsOnlyItsCommands) {
  const std::string in = "x\n";
  const CliRun r = run_program(TS_CLI_PATH, with_tiny({"--interactive"}), &in);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("unknown command 'x'"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("[prefill]"), std::string::npos) << r.out;
  ASSERT_FALSE(r.out.empty());
  EXPECT_EQ(r.out.back(), '\n');
}

// Compare columns line up with the separator row when labels hold "·".
TEST(Cli, CompareHeaderAlignsWithMultibyteLabels) {
  const CliRun r = run_cli(with_tiny(
      {"--steps", "1", "--compare", "repetition_penalty=1.3", "top_p=0.9,temperature=0.8"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = lines_of(r.out);
  auto columns = [](const std::string& l, char mark) {  // display columns of `mark`
    std::vector<int> at;
    int col = 0;
    for (unsigned char c : l) {
      if ((c & 0xC0) == 0x80) continue;
      if (c == static_cast<unsigned char>(mark)) at.push_back(col);
      ++col;
    }
    return at;
  };
  for (size_t i = 0; i + 1 < lines.size(); ++i)
    if (starts_with(lines[i], "step ")) {
      EXPECT_NE(lines[i].find("\u00b7"), std::string::npos) << lines[i];
      EXPECT_EQ(columns(lines[i], '|'), columns(lines[i + 1], '+')) << lines[i];
      return;
    }
  FAIL() << r.out;
}

// Model errors name the file really at fault and say what to do.
TEST(Cli, ModelErrorsNameTheRightFile) {
  const fs::path dir = scratch_dir();
  // A tokenizer from another directory whose vocabulary does not match.
  const std::string other_tok =
      (fs::path(TS_FIXTURE_DIR).parent_path().parent_path() / "assets/models/tokenscope-tiny")
          .string();
  expect_one_error_line(run_cli(with_tiny({"--tokenizer", other_tok})), "tokenscope-cli",
                        "does not match the tokenizer " + other_tok + "/vocab.json", "tokenizer");
  // An llm.c checkpoint without --tokenizer, given relative to the working directory.
  const fs::path llmc_dir = dir / "llmc";
  fs::create_directories(llmc_dir);
  {
    std::ofstream bin(llmc_dir / "gpt2_124M.bin", std::ios::binary);
    const int32_t header[256] = {20240326, 3};
    bin.write(reinterpret_cast<const char*>(header), sizeof header);
  }
  expect_one_error_line(run_program(TS_CLI_PATH, {"--model", "gpt2_124M.bin"}, nullptr, llmc_dir),
                        "tokenscope-cli",
                        "gpt2_124M.bin: an llm.c checkpoint holds no tokenizer; "
                        "pass --tokenizer DIR",
                        "llm.c");
  expect_one_error_line(run_cli({"--model", "/dev/null"}), "tokenscope-cli",
                        "/dev/null: not a regular file or directory", "/dev/null");
  fs::create_symlink(dir / "loop_b", dir / "loop_a");
  fs::create_symlink(dir / "loop_a", dir / "loop_b");
  expect_one_error_line(run_cli({"--model", (dir / "loop_a").string()}), "tokenscope-cli",
                        "symbolic links", "symlink loop");
}

// Values echoed in messages are cut: a 1 MB merges.txt line, a typed quiz
// word, an unknown option or command of 100 KB each give a short line.
TEST(Cli, LongValuesInMessagesAreCut) {
  const fs::path src = fs::path(TS_FIXTURE_DIR) / "tiny";
  const fs::path dir = scratch_dir() / "long_merges";
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors", "vocab.json"})
    fs::copy_file(src / f, dir / f, fs::copy_options::overwrite_existing);
  std::ofstream(dir / "merges.txt") << "#version: 0.2\n" << std::string(1 << 20, 'a') << "\n";
  const CliRun m = run_cli({"--model", dir.string(), "--steps", "1"});
  expect_one_error_line(m, "tokenscope-cli", "(1048576 bytes)", "merges.txt");
  EXPECT_LT(m.err.size(), 400u);

  const std::string huge(100000, 'x');
  const CliRun o = run_cli(with_tiny({"--" + huge}));
  expect_one_error_line(o, "tokenscope-cli", "unknown option '--xxx", "option");
  EXPECT_LT(o.err.size(), 400u);

  const std::string input = "\n" + huge + "\n" + huge + "\nq\n";
  const CliRun q = run_program(TS_CLI_PATH, with_tiny({"--interactive", "--quiz"}), &input);
  ASSERT_EQ(q.exit_code, 0) << q.err;
  bool guess_seen = false, command_seen = false;
  for (const std::string& line : lines_of(q.out)) {
    EXPECT_LT(line.size(), 600u) << line.substr(0, 200);
    guess_seen |= line.find("your guess") != std::string::npos;
    command_seen |= line.find("unknown command 'xxx") != std::string::npos;
  }
  EXPECT_TRUE(guess_seen);
  EXPECT_TRUE(command_seen);
}

// A config.json whose n_ctx (beside a valid n_positions) is 0 or negative is
// refused naming the field; without --seed the seed is 0 and a sampled run
// repeats, as the help says.
TEST(Cli, ConfigNctxIsCheckedAndTheDefaultSeedIsDocumented) {
  const fs::path dir = tiny_variant("nctx", 64);
  for (int bad : {0, -5}) {
    nlohmann::json cfg = nlohmann::json::parse(read_file(dir / "config.json"));
    cfg["n_ctx"] = bad;
    std::ofstream(dir / "config.json") << cfg.dump();
    expect_one_error_line(run_cli({"--model", dir.string(), "--steps", "1"}), "tokenscope-cli",
                          "field n_ctx is " + std::to_string(bad) + ", must be positive",
                          std::to_string(bad));
  }
  const std::vector<std::string> args = with_tiny({"--top-p", "0.9", "--steps", "8", "--quiet"});
  const CliRun a = run_cli(args), b = run_cli(args);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(run_cli({"--help"}).out.find("the seed is 0"), std::string::npos);
}

// ---------------------------------------------------------------- the bench

CliRun run_bench(const std::vector<std::string>& args) {
  return run_program(bench_path().string(), args);
}

// Every bad input: exit code 2 and one line; never an uncaught exception,
// an allocation of gigabytes or a hang.
TEST(Bench, BadInputGivesOneLineAndExitCodeTwo) {
  if (!fs::exists(bench_path())) GTEST_SKIP() << bench_path() << " is not built";
  const fs::path dir = scratch_dir();
  const fs::path file = dir / "a_file";
  std::ofstream(file) << "x";
  const std::string tiny = std::string(TS_FIXTURE_DIR) + "/tiny";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--write-random-124m", file.string()}, "exists and is not a directory"},
      {{"--write-random-124m", "/dev/null"}, "exists and is not a directory"},
      {{"--write-random-124m", "/proc/no/such/dir"}, "cannot create the directory"},
      {{"--model", tiny, "--lanes", "1000"}, "--lanes: 1000 is out of range, at most 8"},
      {{"--model", tiny, "--lanes", "2147483647"}, "at most 8"},
      {{"--model", tiny, "--lanes", "8388608"}, "at most 8"},
      {{"--model", tiny, "--lanes", "2x,4"}, "'2x' is not a whole number"},
      {{"--model", tiny, "--lanes", ""}, "the list is empty"},
      {{"--model", tiny, "--lanes", "1,,2"}, "empty item"},
      {{"--model", tiny, "--batch-sweep", "0"}, "--batch-sweep: 0 is out of range"},
      {{"--model", tiny, "--batch-sweep", "1,65"}, "--batch-sweep: 65 is out of range, at most 64"},
      {{"--model", tiny, "--batch-sweep", "1,two"}, "--batch-sweep: 'two' is not a whole number"},
      {{"--model", tiny, "--batch-sweep", ""}, "--batch-sweep: the list is empty"},
      {{"--model", tiny, "--batch-sweep", "4,"}, "--batch-sweep: empty item"},
      {{"--model", tiny, "--batch-sweep", "1,2,1"}, "--batch-sweep: 1 is given twice"},
      {{"--model", tiny, "--lanes", "4,4"}, "--lanes: 4 is given twice"},
      {{"--model", tiny, "--cache-compare", "8,16,8"}, "--cache-compare: 8 is given twice"},
      {{"--model", tiny, "--threads", "100000"}, "--threads: 100000 is out of range, at most"},
      {{"--model", tiny, "--context", "64"}, "--context: 64 is out of range"},
      {{"--model", tiny, "--context", "99999999999"}, "out of range"},
      {{"--model=" + tiny, "--decode-steps=0"}, "--decode-steps: 0 is out of range"},
      {{"--model", tiny, "--device", "gpu"}, "--device: expected auto, cpu or cuda"},
      {{"--model", ""}, "--model: the value is empty"},
      {{"--model", tiny, "--cpu-vectors", "avx512"}, "--cpu-vectors: 'avx512' is not auto or avx2"},
      {{"--model", tiny, "--cpu-vectors", ""}, "is not auto or avx2"},
      {{"--model", tiny, "--cpu-vectors"}, "--cpu-vectors"},
      {{"--model", tiny, "--formats", "f32"}, "--formats: list two or more formats"},
      {{"--model", tiny, "--formats", "f32,F32"},
       "--formats: expected f32, bf16, f16, q8 or q4, got 'F32'"},
      {{"--model", tiny, "--formats", "q8,bf16,q8"}, "--formats: q8 is given twice"},
      {{"--model", tiny, "--formats", ""}, "--formats: the list is empty"},
      {{"--model", tiny, "--formats", "f32,"}, "--formats: empty item"},
      {{"--model", tiny, "--formats", "f32,q4", "--device", "cuda"},
       "--formats: q4 runs on the CPU only (the CUDA backend reads f32, bf16 or f16)"},
      {{"--model", tiny, "--formats", "f32,q8", "--spec-self-draft", "--spec-only"},
       "--formats and --spec-only conflict"},
  };
  for (const auto& [args, says] : cases) {
    std::string joined;
    for (const auto& a : args) joined += " '" + a + "'";
    expect_one_error_line(run_bench(args), "tokenscope-bench", says, joined);
  }
}

// The sizes the user did not give fit the model: the fixture's context of
// 64 runs with no --context or --prefill-tokens (half the context cached,
// a prefill of the whole context), and the speculative section's default
// new tokens fit after its prompt. With no --model the bundled model is
// benchmarked, as the help says.
TEST(Bench, DefaultsFitTheModelAndNoModelMeansTheBundledOne) {
  if (!fs::exists(bench_path())) GTEST_SKIP() << bench_path() << " is not built";
  const std::string tiny = std::string(TS_FIXTURE_DIR) + "/tiny";
  const CliRun r = run_bench({"--model", tiny, "--decode-steps", "2", "--lanes", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["decode"][0]["context"], 32);
  EXPECT_EQ(doc["prefill"][0]["tokens"], 64);

  const CliRun s =
      run_bench({"--model", tiny, "--spec-self-draft", "--spec-only", "--spec-gamma", "2"});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const nlohmann::json pair = nlohmann::json::parse(s.out)["speculative"]["pairs"][0];
  EXPECT_LE(pair["new_tokens"].get<int>(), 64);
  EXPECT_GE(pair["new_tokens"].get<int>(), 2);

  const CliRun b =
      run_bench({"--decode-steps", "2", "--lanes", "1", "--context", "8", "--prefill-tokens", "8"});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_NE(nlohmann::json::parse(b.out)["model"].get<std::string>().find("tokenscope-tiny"),
            std::string::npos);

  // A --spec-gamma list with an empty item says so, not "the list is empty".
  expect_one_error_line(run_bench({"--model", tiny, "--spec-self-draft", "--spec-gamma", "4,"}),
                        "tokenscope-bench", "--spec-gamma: empty item in '4,'", "4,");
  expect_one_error_line(run_bench({"--model", tiny, "--spec-self-draft", "--spec-gamma", ",auto"}),
                        "tokenscope-bench", "--spec-gamma: empty item in ',auto'", ",auto");
  expect_one_error_line(run_bench({"--model", tiny, "--spec-self-draft", "--spec-gamma", ""}),
                        "tokenscope-bench", "--spec-gamma: the list is empty", "empty");
}

// --cpu-vectors avx2 keeps the decode kernel to AVX2; auto uses AVX-512
// exactly where /proc/cpuinfo lists avx512f (this build targets AVX2).
TEST(Bench, NamesTheDecodeKernelItRan) {
  if (!fs::exists(bench_path())) GTEST_SKIP() << bench_path() << " is not built";
  const std::string tiny = std::string(TS_FIXTURE_DIR) + "/tiny";
  const std::vector<std::string> base = {"--model",          tiny, "--context",      "16",
                                         "--prefill-tokens", "16", "--decode-steps", "2",
                                         "--lanes",          "1"};
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  bool avx512f = false, avx2 = false;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    avx512f = line.find(" avx512f") != std::string::npos;
    avx2 = line.find(" avx2") != std::string::npos;
    break;
  }
  if (!avx2) GTEST_SKIP() << "this CPU has no AVX2";
  for (const std::string v : {"auto", "avx2"}) {
    std::vector<std::string> args = base;
    args.insert(args.end(), {"--cpu-vectors", v});
    const CliRun r = run_bench(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string kernel =
        nlohmann::json::parse(r.out)["machine"]["cpu_decode_kernel"].get<std::string>();
    EXPECT_EQ(kernel, v == "auto" && avx512f ? "avx512" : "avx2") << v;
  }
}

// ratio_to_one_lane divides by the 1-lane time, wherever 1 is in the list
// and when it is not listed at all. Each entry's ms_per_step is its own
// measurement, so ms_per_step / ratio_to_one_lane is the time the bench
// divided by: checked against which measurement it must be, not against the
// ratio's own formula.
TEST(Bench, RatioIsToTheOneLaneTime) {
  if (!fs::exists(bench_path())) GTEST_SKIP() << bench_path() << " is not built";
  const std::string tiny = std::string(TS_FIXTURE_DIR) + "/tiny";
  const std::vector<std::string> base = {"--model",          tiny, "--context",      "16",
                                         "--prefill-tokens", "16", "--decode-steps", "3"};
  const auto lanes_of = [&](const std::string& list) {
    std::vector<std::string> args = base;
    args.insert(args.end(), {"--lanes", list});
    const CliRun r = run_bench(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out)["lanes"] : nlohmann::json::array();
  };
  const auto divisor_ms = [](const nlohmann::json& entry) {
    return entry["ms_per_step"].get<double>() / entry["ratio_to_one_lane"].get<double>();
  };

  // 1 listed second: the divisor is that entry's measured time.
  const nlohmann::json listed = lanes_of("4,1");
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0]["lanes"], 4);
  EXPECT_EQ(listed[1]["lanes"], 1);
  const double one_lane_ms = listed[1]["ms_per_step"].get<double>();
  ASSERT_GT(one_lane_ms, 0);
  EXPECT_NEAR(divisor_ms(listed[0]), one_lane_ms, one_lane_ms * 1e-9);
  EXPECT_DOUBLE_EQ(listed[1]["ratio_to_one_lane"].get<double>(), 1.0);

  // 1 not listed: one divisor for the whole list, and it is none of the
  // listed entries' times (a 1-lane time measured on its own).
  const nlohmann::json unlisted = lanes_of("4,2");
  ASSERT_EQ(unlisted.size(), 2u);
  const double divisor = divisor_ms(unlisted[0]);
  ASSERT_GT(divisor, 0);
  EXPECT_NEAR(divisor_ms(unlisted[1]), divisor, divisor * 1e-9);
  for (const nlohmann::json& entry : unlisted) {
    const double ms = entry["ms_per_step"].get<double>();
    EXPECT_GT(std::fabs(ms - divisor), divisor * 1e-9)
        << entry["lanes"] << " lanes' own time was taken as the 1-lane time";
  }
}

// The formats section: one entry per listed format in the list's order, each
// step over its own bound and over the first format's step of the run. Its
// bytes are the ones a --weights run of that format counts (the same
// checkpoint, the same context), fewer for every narrower format, and its
// bound is those bytes at the run's probed bandwidth.
TEST(Bench, FormatsSectionTimesEachFormatBesideTheFirst) {
  if (!fs::exists(bench_path())) GTEST_SKIP() << bench_path() << " is not built";
  const std::string tiny = std::string(TS_FIXTURE_DIR) + "/tiny";
  const std::vector<std::string> base = {"--model",          tiny, "--context",      "16",
                                         "--prefill-tokens", "16", "--decode-steps", "3",
                                         "--lanes",          "1"};
  std::vector<std::string> args = base;
  args.insert(args.end(), {"--formats", "bf16,f32,q4,q8"});
  const CliRun r = run_bench(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out)["formats"];
  EXPECT_EQ(doc["first"], "bf16");
  EXPECT_EQ(doc["rounds"], 3);
  const double bandwidth = doc["read_bandwidth_median_gb_per_s"].get<double>() * 1e9;
  ASSERT_GT(bandwidth, 0);
  const nlohmann::json& f = doc["formats"];
  ASSERT_EQ(f.size(), 4u);
  std::map<std::string, double> bytes;
  const double first_ms = f[0]["ms_per_step_median"].get<double>();
  for (const nlohmann::json& e : f) {
    const std::string name = e["weights"].get<std::string>();
    bytes[name] = e["bytes_per_step"].get<double>();
    const double ms = e["ms_per_step_median"].get<double>();
    ASSERT_GT(ms, 0) << name;
    EXPECT_LE(e["ms_per_step_best"].get<double>(), ms) << name;
    EXPECT_NEAR(e["memory_bound_ms"].get<double>(), bytes[name] / bandwidth * 1e3,
                1e-9 * e["memory_bound_ms"].get<double>())
        << name;
    EXPECT_NEAR(e["ratio_to_memory_bound_median"].get<double>(),
                ms / e["memory_bound_ms"].get<double>(), 1e-9 * ms)
        << name;
    EXPECT_NEAR(e["ratio_to_first_median"].get<double>(), ms / first_ms, 1e-9 * ms) << name;
    EXPECT_GT(e["ratio_to_first_paired_median"].get<double>(), 0) << name;
  }
  EXPECT_EQ(f[0]["ratio_to_first_paired_median"].get<double>(), 1.0);
  EXPECT_EQ((std::vector<std::string>{f[0]["weights"], f[1]["weights"], f[2]["weights"],
                                      f[3]["weights"]}),
            (std::vector<std::string>{"bf16", "f32", "q4", "q8"}));
  EXPECT_LT(bytes["q4"], bytes["q8"]);
  EXPECT_LT(bytes["q8"], bytes["bf16"]);
  EXPECT_LT(bytes["bf16"], bytes["f32"]);
  for (const std::string format : {"f32", "q4"}) {
    args = base;
    args.insert(args.end(), {"--weights", format});
    const CliRun one = run_bench(args);
    ASSERT_EQ(one.exit_code, 0) << one.err;
    EXPECT_EQ(nlohmann::json::parse(one.out)["decode"][0]["bytes_per_step"].get<double>(),
              bytes[format])
        << format;
  }
}

// Eight lanes forked from a context of 8 tokens on a model whose context
// (20) is not a multiple of the KV block size: every lane's copy-on-write
// block must fit (the pool used to be sized in tokens and ran out).
TEST(Bench, LanesFitAContextThatIsNotAMultipleOfTheBlockSize) {
  if (!fs::exists(bench_path())) GTEST_SKIP() << bench_path() << " is not built";
  const fs::path model = tiny_variant("ctx20", 20);
  const CliRun r = run_bench({"--model", model.string(), "--context", "8", "--prefill-tokens", "8",
                              "--decode-steps", "12", "--lanes", "8"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["lanes"][0]["lanes"], 8);
}

// ------------------------------------------------------- the banned-words stage

// On by default for the bundled model (no --model), off for a model of one's
// own unless --ban-words names a list; --no-ban-words switches it off.
TEST(CliBannedWords, DefaultsAndSwitches) {
  CliRun r = run_cli({"--steps", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("banned words: on, 403 entries"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("banned_words/en.txt"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("    banned words: "), std::string::npos) << r.out;  // per step
  r = run_cli({"--steps", "2", "--no-ban-words"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("banned words: off"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("tokens removed"), std::string::npos) << r.out;
  r = run_cli(with_tiny({"--steps", "2"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("banned words: off"), std::string::npos) << r.out;
  const CliRun help = run_cli({"--help"});
  EXPECT_NE(help.out.find("--ban-words FILE"), std::string::npos);
  EXPECT_NE(help.out.find("--no-ban-words"), std::string::npos);
}

// A user list from a file: the stage is on with it and recorded in the JSON
// (which list, which tokens it removed); the prompt, which holds listed
// words, is printed and fed unchanged (its tokens are the stage-off run's).
TEST(CliBannedWords, AUserListIsUsedAndRecordedAndThePromptIsUnchanged) {
  const fs::path dir = scratch_dir();
  const std::string prompt = "the cat sat";
  const CliRun off = run_cli(
      with_tiny({"--prompt", prompt, "--steps", "4", "--json", (dir / "off.json").string()}));
  ASSERT_EQ(off.exit_code, 0) << off.err;
  const nlohmann::json jo = nlohmann::json::parse(read_file(dir / "off.json"));
  EXPECT_TRUE(jo["steps"][0]["lanes"][0]["banned_words"].is_null());
  { std::ofstream(dir / "list.txt") << "# a comment\n\ncat\n  sat  \n"; }
  const CliRun on =
      run_cli(with_tiny({"--prompt", prompt, "--steps", "4", "--ban-words",
                         (dir / "list.txt").string(), "--json", (dir / "on.json").string()}));
  ASSERT_EQ(on.exit_code, 0) << on.err;
  EXPECT_NE(on.out.find("banned words: on, 2 entries"), std::string::npos) << on.out;
  const nlohmann::json jn = nlohmann::json::parse(read_file(dir / "on.json"));
  EXPECT_EQ(jn["prompt_tokens"], jo["prompt_tokens"]);
  EXPECT_EQ(jn["steps"][0]["lanes"][0]["input_tokens"], jo["steps"][0]["lanes"][0]["input_tokens"]);
  const nlohmann::json& lane0 = jn["steps"][0]["lanes"][0];
  EXPECT_EQ(lane0["banned_words"]["entries"], 2);
  EXPECT_EQ(lane0["banned_words"]["source"], (dir / "list.txt").string());
  bool stage_found = false;
  for (const auto& st : lane0["sampling_stages"]) {
    if (st["name"] != "banned_words") continue;
    stage_found = true;
    EXPECT_TRUE(st["active"].get<bool>());
    EXPECT_GT(st["removed_here"].get<int>(), 0);
    EXPECT_EQ(st["removed_here"].get<int>(), static_cast<int>(st["removed_ids"].size()));
  }
  EXPECT_TRUE(stage_found);
}

// Bad lists and conflicting flags: one line naming the file (and line), exit 2.
TEST(CliBannedWords, BadListsAndFlagsAreRefused) {
  const fs::path dir = scratch_dir();
  expect_one_error_line(run_cli(with_tiny({"--ban-words", (dir / "none.txt").string()})),
                        "tokenscope-cli", (dir / "none.txt").string() + ": cannot be read",
                        "missing list");
  { std::ofstream(dir / "empty.txt") << "# nothing but a comment\n\n"; }
  expect_one_error_line(run_cli(with_tiny({"--ban-words", (dir / "empty.txt").string()})),
                        "tokenscope-cli", (dir / "empty.txt").string() + ": the word list is empty",
                        "empty list");
  { std::ofstream(dir / "bad.txt") << "fine\nnot \xff utf-8\n"; }
  expect_one_error_line(
      run_cli(with_tiny({"--ban-words", (dir / "bad.txt").string()})), "tokenscope-cli",
      (dir / "bad.txt").string() + ":2: the line is not valid UTF-8", "malformed list");
  expect_one_error_line(run_cli(with_tiny({"--ban-words", "a.txt", "--no-ban-words"})),
                        "tokenscope-cli", "--ban-words and --no-ban-words conflict", "both");
  expect_one_error_line(run_cli(with_tiny({"--no-ban-words", "--no-ban-words"})), "tokenscope-cli",
                        "--no-ban-words is given twice", "twice");
  expect_one_error_line(run_cli(with_tiny({"--no-ban-words=yes"})), "tokenscope-cli",
                        "--no-ban-words takes no value", "value");
  expect_one_error_line(run_cli(with_tiny({"--ban-words="})), "tokenscope-cli",
                        "--ban-words: the value is empty", "empty value");
  expect_one_error_line(run_cli(with_tiny({"--eval-loss", "x.txt", "--no-ban-words"})),
                        "tokenscope-cli", "--eval-loss and --no-ban-words conflict", "eval-loss");
}

}  // namespace

// ---- --score: a given continuation's probabilities under the model ----

// Probability of `id` under one row of reference logits (softmax in long double).
double reference_probability(const std::vector<float>& row, int id) {
  long double mx = row[0], sum = 0;
  for (float x : row) mx = std::max(mx, static_cast<long double>(x));
  for (float x : row) sum += std::exp(static_cast<long double>(x) - mx);
  return static_cast<double>(std::exp(static_cast<long double>(row[id]) - mx) / sum);
}

TEST(CliScore, TableAndJsonGiveThePyTorchProbabilities) {
  std::ifstream in(fs::path(TS_FIXTURE_DIR) / "tiny/reference.json");
  const nlohmann::json ref = nlohmann::json::parse(in)["cases"][0];
  ASSERT_EQ(ref["prompt"], "The cat sat on the mat.");
  const fs::path json = scratch_dir() / "score.json";
  const CliRun r = run_cli(
      with_tiny({"--prompt", "The cat sat on the", "--score", " mat.", "--json", json.string()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(read_file(json));
  const std::vector<int> ids = ref["token_ids"].get<std::vector<int>>();
  ASSERT_EQ(j["token_ids"].get<std::vector<int>>(), ids);
  const int context = j["context_tokens"];
  ASSERT_EQ(j["tokens"].size(), ids.size() - context);
  double total = 0;
  for (size_t i = 0; i < j["tokens"].size(); ++i) {
    const nlohmann::json& t = j["tokens"][i];
    const int pos = context + static_cast<int>(i);
    EXPECT_EQ(t["id"], ids[pos]);
    const double p =
        reference_probability(ref["logits"][pos - 1].get<std::vector<float>>(), ids[pos]);
    EXPECT_NEAR(t["probability"].get<double>(), p, 1e-5) << "token " << i;
    EXPECT_EQ(t["top"].size(), 5u);
    total += std::log(p);
    // The table has a row for it: its number, the token and its rank.
    const std::string row_start =
        std::to_string(i + 1) + " \"" + t["text"].get<std::string>() + "\"";
    bool found = false;
    for (const std::string& line : lines_of(r.out)) {
      if (line.find(row_start) == std::string::npos) continue;
      found = true;
      std::istringstream cols(line.substr(line.find(row_start) + row_start.size()));
      double shown_p = 0;
      int shown_rank = 0;
      cols >> shown_p >> shown_rank;
      EXPECT_NEAR(shown_p, t["probability"].get<double>(), 1e-4 + 0.01 * shown_p) << line;
      EXPECT_EQ(shown_rank, t["rank"].get<int>()) << line;
    }
    EXPECT_TRUE(found) << row_start << "\n" << r.out;
  }
  EXPECT_NEAR(j["total_log_prob"].get<double>(), total, 1e-4);
  const double ppl = std::exp(-total / static_cast<double>(j["tokens"].size()));
  EXPECT_NEAR(j["perplexity"].get<double>(), ppl, 1e-4 * ppl);
  char line[64];
  std::snprintf(line, sizeof line, "perplexity %.4g over %zu tokens", j["perplexity"].get<double>(),
                j["tokens"].size());
  EXPECT_NE(r.out.find(line), std::string::npos) << r.out;
}

TEST(CliScore, TwoContinuationsShowTheFirstDifference) {
  const fs::path json = scratch_dir() / "two.json";
  const CliRun r = run_cli(with_tiny({"--prompt", "The cat sat on", "--score", " the mat",
                                      "--score", " the idea", "--json", json.string()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(read_file(json));
  ASSERT_EQ(j["scores"].size(), 2u);
  const nlohmann::json& d = j["first_difference"];
  ASSERT_EQ(d["index"], 1);  // " the" is shared, then " mat" vs " idea"
  EXPECT_EQ(d["a"]["id"], j["scores"][0]["tokens"][1]["id"]);
  EXPECT_EQ(d["b"]["id"], j["scores"][1]["tokens"][1]["id"]);
  EXPECT_DOUBLE_EQ(d["b"]["probability"].get<double>(),
                   j["scores"][1]["tokens"][1]["probability"].get<double>());
  EXPECT_DOUBLE_EQ(j["scores"][0]["tokens"][0]["probability"].get<double>(),
                   j["scores"][1]["tokens"][0]["probability"].get<double>());
  EXPECT_NE(r.out.find("score 1: \" the mat\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("score 2: \" the idea\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("first difference: scored token 2: \""), std::string::npos) << r.out;
}

TEST(CliScore, BadInputGivesOneLineAndExitCodeTwo) {
  std::string long_text;
  for (int i = 0; i < 40; ++i) long_text += " the cat";  // beyond the fixture's 64 tokens
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {with_tiny({"--score", "x", "--compare", "greedy"}), "--score and --compare conflict"},
      {with_tiny({"--score", "x", "--interactive"}), "--score and --interactive conflict"},
      {with_tiny({"--score", "x", "--temperature", "0.7"}), "--score and --temperature conflict"},
      {with_tiny({"--score", "x", "--steps", "3"}), "--score and --steps conflict"},
      {with_tiny({"--score", "a", "--score", "b", "--score", "c"}), "at most twice"},
      {with_tiny({"--prompt", "The", "--score="}), "the continuation is empty"},
      {with_tiny({"--prompt", "", "--score", "The"}), "nothing to predict it from"},
      {with_tiny({"--prompt", "The", "--score", long_text}), "longer than the model's context"},
  };
  for (const auto& [args, says] : cases) {
    const CliRun r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << args.back();
    const std::vector<std::string> lines = error_lines(r);
    ASSERT_EQ(lines.size(), 1u) << r.err;
    EXPECT_NE(lines[0].find(says), std::string::npos) << lines[0];
  }
  const CliRun help = run_cli({"--help"});
  EXPECT_NE(help.out.find("--score TEXT"), std::string::npos);
}

// ---- --quiz: guess each step's token in the interactive mode ----

TEST(CliQuiz, GuessesAreScoredWithTheStepsProbabilitiesAndTheModelsChoiceIsRevealed) {
  const fs::path json = scratch_dir() / "quiz.json";
  // Enter: prefill, guess option 1; Enter: decode step 1, guess a word of several tokens.
  const std::string input = "\n1\n\n elephantine\nq\n";
  const CliRun r = run_program(TS_CLI_PATH,
                               with_tiny({"--interactive", "--quiz", "--json", json.string(),
                                          "--json-full-logits", "--prompt", "The cat sat on"}),
                               &input);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("quiz: which token comes after \"The cat sat on\"?"), std::string::npos)
      << r.out;
  const nlohmann::json j = nlohmann::json::parse(read_file(json));
  ASSERT_EQ(j["steps"].size(), 2u);
  std::vector<std::string> guesses, reveals;
  for (const std::string& line : lines_of(r.out)) {
    if (line.find("your guess \"") != std::string::npos) guesses.push_back(line);
    if (line.find("reveal: the model chose \"") != std::string::npos) reveals.push_back(line);
  }
  ASSERT_EQ(guesses.size(), 2u) << r.out;
  ASSERT_EQ(reveals.size(), 2u) << r.out;
  for (int s = 0; s < 2; ++s) {
    const nlohmann::json& lane = j["steps"][s]["lanes"][0];
    std::vector<float> logits;
    for (const auto& v : lane["logits"]) logits.push_back(v.get<float>());
    long double mx = logits[0], sum = 0;
    for (float x : logits) mx = std::max(mx, static_cast<long double>(x));
    for (float x : logits) sum += std::exp(static_cast<long double>(x) - mx);
    // The guess's printed rank names one token; its printed probability is that token's.
    const std::string& g = guesses[s];
    const size_t at = g.find(": p=");
    ASSERT_NE(at, std::string::npos) << g;
    const double shown_p = std::stod(g.substr(at + 4));
    const int shown_rank = std::stoi(g.substr(g.find(", rank ") + 7));
    int found = 0;
    for (size_t t = 0; t < logits.size(); ++t) {
      int rank = 1;
      for (float x : logits) rank += x > logits[t];
      if (rank != shown_rank) continue;
      ++found;
      const double p =
          static_cast<double>(std::exp(static_cast<long double>(logits[t]) - mx) / sum);
      EXPECT_NEAR(shown_p, p, 1e-4 + 0.01 * p) << g;
    }
    EXPECT_EQ(found, 1) << g;
    // Greedy: the model chose its top-1.
    EXPECT_NE(reveals[s].find(", rank 1, "), std::string::npos) << reveals[s];
  }
  EXPECT_NE(guesses[1].find("\"\xE2\x90\xA3"
                            "elephantine\" is "),
            std::string::npos)
      << guesses[1];
  EXPECT_NE(guesses[1].find("tokens: only its first"), std::string::npos) << guesses[1];
  EXPECT_NE(r.out.find("quiz score: 2 guesses, mean log-probability"), std::string::npos) << r.out;

  for (const auto& [args, says] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {with_tiny({"--quiz"}), "--quiz needs --interactive"},
           {with_tiny({"--interactive", "--quiz", "--compare", "greedy", "beams=2"}),
            "--quiz and --compare conflict"},
           {with_tiny({"--interactive", "--quiz", "--strategy", "beams=2"}),
            "--quiz and beam search conflict"}}) {
    const CliRun bad = run_cli(args);
    EXPECT_EQ(bad.exit_code, 2);
    const std::vector<std::string> lines = error_lines(bad);
    ASSERT_EQ(lines.size(), 1u) << bad.err;
    EXPECT_NE(lines[0].find(says), std::string::npos) << lines[0];
  }
}

// ---- --memory: where memory goes, after loading and after the run ----
namespace {

// The lines of the block that follows "memory WHEN:" in the output.
std::vector<std::string> memory_block(const std::string& out, const std::string& when) {
  std::vector<std::string> block;
  bool in = false;
  for (const std::string& l : lines_of(out)) {
    if (l == "memory " + when + ":") {
      in = true;
      continue;
    }
    if (in && !starts_with(l, "  ")) break;
    if (in) block.push_back(l.substr(2));
  }
  return block;
}

// The figure that follows `after` in `line`, in bytes (-1 when absent):
// "0 B", "4.0 KiB", "1.5 MiB", "6.20 GiB".
double bytes_after(const std::string& line, const std::string& after) {
  const size_t at = line.find(after);
  if (at == std::string::npos) return -1;
  std::istringstream in(line.substr(at + after.size()));
  double value = 0;
  std::string unit;
  if (!(in >> value >> unit)) return -1;
  if (unit == "B") return value;
  if (unit == "KiB") return value * 1024;
  if (unit == "MiB") return value * 1048576;
  if (unit == "GiB") return value * 1073741824;
  return -1;
}

TEST(Cli, MemoryPrintsEveryPartAfterLoadAndAfterTheRun) {
  const CliRun r = run_cli(with_tiny({"--steps", "3", "--memory"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> loaded = memory_block(r.out, "after load");
  const std::vector<std::string> run = memory_block(r.out, "after the run");
  ASSERT_GE(loaded.size(), 5u) << r.out;
  ASSERT_GE(run.size(), 5u) << r.out;
  const char* parts[] = {"weights", "KV pool", "trace", "scratch", "process"};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_TRUE(starts_with(loaded[i], parts[i])) << loaded[i];
    EXPECT_TRUE(starts_with(run[i], parts[i])) << run[i];
    EXPECT_GE(bytes_after(run[i], parts[i]), 0) << run[i];  // a figure with its unit
  }
  // The tiny model (2 layers x 64 dims, context 64, 457 tokens) has 133,440
  // fp32 parameters: 533,760 bytes, read from its F32 file into memory, all
  // of it resident (counted in whole pages, each tensor at a 64-byte boundary).
  EXPECT_TRUE(starts_with(loaded[0],
                          "weights  521.2 KiB fp32 (stored F32): 521.2 KiB read into memory at "
                          "load, 0 B read in place from the file map; "))
      << loaded[0];
  const double resident = bytes_after(loaded[0], "file map; ");
  EXPECT_GE(resident, 533760 - 0.05 * 1024) << loaded[0];
  EXPECT_LE(resident, 533760 + 64 * 1024) << loaded[0];
  // Nothing traced after load; the run's prefill and 3 steps keep attention
  // and logits, within the default budget.
  EXPECT_TRUE(starts_with(loaded[2], "trace    0 B of a 256.0 MiB budget")) << loaded[2];
  EXPECT_GT(bytes_after(run[2], "trace    "), 0.0) << run[2];
  // The session's sequence holds the prompt and the 3 steps' tokens at the
  // end: its blocks are held and their pages resident.
  EXPECT_EQ(bytes_after(loaded[1], "reserved, "), 0.0) << loaded[1];
  EXPECT_GT(bytes_after(run[1], "reserved, "), 0.0) << run[1];
  // One token's K and V in 2 layers of 64 fp32 values each: 2 x 2 x 64 x 4.
  EXPECT_NE(loaded[1].find("; 1024 B per token (K and V, every layer)"), std::string::npos)
      << loaded[1];
  EXPECT_NE(run[4].find("/proc/self/status"), std::string::npos) << run[4];
  // Without --memory, no report.
  const CliRun plain = run_cli(with_tiny({"--steps", "1"}));
  EXPECT_EQ(plain.out.find("memory after"), std::string::npos);
}

TEST(Cli, MemoryTakesNoValueAndNotWithEvalLoss) {
  expect_one_error_line(run_cli(with_tiny({"--memory=yes"})), "tokenscope-cli",
                        "--memory takes no value", "--memory=yes");
  expect_one_error_line(run_cli(with_tiny({"--eval-loss", "x.txt", "--memory"})), "tokenscope-cli",
                        "--eval-loss and --memory conflict", "--eval-loss with --memory");
  EXPECT_NE(run_cli({"--help"}).out.find("--memory"), std::string::npos);
}

// ---------------------------------------------------------- contrastive search

// A contrastive lane in plain output (candidates with their penalty and
// score, the winner marked), --compare (its penalty in the column) and
// --json (every candidate); the three agree on the text, and alpha 0 is
// greedy.
TEST(CliContrastive, PlainCompareAndJsonAgree) {
  const fs::path json_path = scratch_dir() / "contrastive.json";
  // The bundled model (no --model): its contrastive winners are not always
  // the most probable candidate, which the draw check below needs.
  const CliRun plain = run_cli(
      {"--steps", "5", "--strategy", "contrastive=4,alpha=0.6", "--json", json_path.string()});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_NE(plain.out.find("contrastive k=4 alpha=0.60"), std::string::npos) << plain.out;
  EXPECT_NE(plain.out.find("4 contrastive candidates"), std::string::npos) << plain.out;
  int marked = 0;
  for (const std::string& line : lines_of(plain.out))
    if (starts_with(line, "      * ")) ++marked;
  EXPECT_EQ(marked, 6);  // one winner per step: prefill + 5 decode steps

  const nlohmann::json session = nlohmann::json::parse(read_file(json_path));
  ASSERT_EQ(session["steps"].size(), 6u);
  const auto& lane = session["lanes"][0];
  int not_most_probable = 0;
  for (const auto& step : session["steps"]) {
    const auto& c = step["lanes"][0]["contrastive"];
    ASSERT_EQ(c["candidates"].size(), 4u);
    EXPECT_FLOAT_EQ(c["alpha"].get<float>(), 0.6f);
    const auto& won = c["candidates"][c["chosen"].get<int>()];
    if (c["chosen"].get<int>() != 0) ++not_most_probable;
    EXPECT_TRUE(won["chosen"].get<bool>());
    EXPECT_EQ(won["token"], step["lanes"][0]["chosen_token"]);
    EXPECT_EQ(step["lanes"][0]["draw"]["chosen_token"], won["token"]);
    for (const auto& cand : c["candidates"]) {
      // score = (1 - alpha) p - alpha penalty, and the winner's is the largest.
      EXPECT_NEAR(cand["score"].get<double>(),
                  0.4 * cand["prob"].get<double>() - 0.6 * cand["penalty"].get<double>(), 1e-6);
      EXPECT_LE(cand["score"].get<double>(), won["score"].get<double>());
      EXPECT_GE(cand["penalty"].get<double>(), -1.0);
      EXPECT_LE(cand["penalty"].get<double>(), 1.0 + 1e-6);
    }
  }

  EXPECT_GT(not_most_probable, 0);

  const CliRun compare = run_cli(
      {"--steps", "5", "--compare", "greedy", "contrastive=4,alpha=0.6", "contrastive=2,alpha=0"});
  ASSERT_EQ(compare.exit_code, 0) << compare.err;
  const std::string text = lane["text"].get<std::string>();
  EXPECT_NE(
      compare.out.find("lane 1 (contrastive 4 \u00b7 \u03b1 0.6): Today's weather is so" + text),
      std::string::npos)
      << compare.out;
  EXPECT_NE(compare.out.find(" pen "), std::string::npos) << compare.out;
  // alpha 0 chooses what greedy chooses.
  std::string greedy, zero;
  for (const std::string& line : lines_of(compare.out)) {
    if (starts_with(line, "lane 0 (greedy): ")) greedy = line.substr(17);
    if (starts_with(line, "lane 2 (contrastive 2 \u00b7 \u03b1 0): "))
      zero = line.substr(line.find("): ") + 3);
  }
  ASSERT_FALSE(greedy.empty()) << compare.out;
  EXPECT_EQ(zero, greedy);
}

// Out-of-range k or alpha, and contrastive with sampling keys or flags: one
// line, exit code 2.
TEST(CliContrastive, BadInputIsOneLine) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--strategy", "contrastive=1"}, "contrastive=1 is not a whole number from 2 to 16"},
      {{"--strategy", "contrastive=17,alpha=0.6"}, "contrastive=17"},
      {{"--strategy", "contrastive=4,alpha=1.5"}, "alpha=1.5 is not a number from 0 to 1"},
      {{"--strategy", "contrastive=4,alpha=-0.2"}, "alpha=-0.2"},
      {{"--strategy", "alpha=0.3"}, "alpha needs contrastive=K"},
      {{"--strategy", "contrastive=4,temperature=0.7"},
       "contrastive cannot be combined with temperature"},
      {{"--strategy", "contrastive=4,top_p=0.9"}, "contrastive cannot be combined with top_p"},
      {{"--compare", "greedy", "contrastive=4,sample"},
       "contrastive cannot be combined with sample"},
      {{"--strategy", "contrastive=4,beams=2"}, "contrastive cannot be combined with beams"},
      {{"--strategy", "contrastive=4", "--temperature", "0.7"}, "conflict"},
  };
  for (const auto& [args, says] : cases) {
    std::string joined;
    for (const auto& a : args) joined += " " + a;
    expect_one_error_line(run_cli(with_tiny(args)), "tokenscope-cli", says, joined);
  }
}

// ---------------------------------------------------------- DoLa

// A DoLa lane in plain output (the premature layer, the divergences, the
// kept tokens with their contrast), --compare (the premature layer in the
// column) and --json (the dola record); the three agree.
TEST(CliDola, PlainCompareAndJsonAgree) {
  const fs::path json_path = scratch_dir() / "dola.json";
  const CliRun plain =
      run_cli({"--steps", "5", "--strategy", "dola=1,3", "--json", json_path.string()});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_NE(plain.out.find("dola: premature layer "), std::string::npos) << plain.out;
  EXPECT_NE(plain.out.find(" (div "), std::string::npos) << plain.out;

  const nlohmann::json session = nlohmann::json::parse(read_file(json_path));
  ASSERT_EQ(session["steps"].size(), 6u);
  EXPECT_EQ(session["lanes"][0]["strategy"], "dola=1,3");
  EXPECT_EQ(session["steps"][0]["lanes"][0]["params"]["dola_layers"], "1,3");
  for (const auto& step : session["steps"]) {
    const auto& lane = step["lanes"][0];
    const auto& d = lane["dola"];
    ASSERT_EQ(d["candidate_layers"].size(), 2u);
    const int premature = d["premature_layer"].get<int>();
    EXPECT_TRUE(premature == 1 || premature == 3);
    // The premature layer is the candidate of largest divergence.
    double best = -1;
    int best_layer = -1;
    for (const auto& l : d["candidate_layers"]) {
      if (l["divergence"].get<double>() > best)
        best = l["divergence"].get<double>(), best_layer = l["layer"].get<int>();
      EXPECT_EQ(l["premature"].get<bool>(), l["layer"].get<int>() == premature);
    }
    EXPECT_EQ(best_layer, premature);
    // Greedy DoLa takes the highest contrast among the kept tokens.
    ASSERT_FALSE(d["top_tokens"].empty());
    EXPECT_EQ(d["top_tokens"][0]["token"], lane["chosen_token"]);
    EXPECT_TRUE(d["top_tokens"][0]["chosen"].get<bool>());
    EXPECT_EQ(lane["draw"]["chosen_token"], lane["chosen_token"]);
    for (const auto& t : d["top_tokens"])
      EXPECT_NEAR(t["contrast"].get<double>(),
                  t["final_log_prob"].get<double>() - t["premature_log_prob"].get<double>(), 1e-5);
    // The relative-top filter: every other token's stage logit is removed.
    EXPECT_EQ(lane["sampling_stages"][0]["kept"], d["kept"]);
  }

  const CliRun compare = run_cli({"--steps", "5", "--compare", "greedy", "dola=low"});
  ASSERT_EQ(compare.exit_code, 0) << compare.err;
  EXPECT_NE(compare.out.find(" L2"), std::string::npos) << compare.out;  // 4 layers: low = [2]
  EXPECT_NE(compare.out.find("DoLa's premature layer"), std::string::npos) << compare.out;
  EXPECT_NE(compare.out.find("lane 1 (DoLa low): "), std::string::npos) << compare.out;
}

// Layers the model lacks and impossible combinations: one line, exit code 2.
TEST(CliDola, BadInputIsOneLine) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--strategy", "dola=2"}, "layer 2 is not a premature layer of a 2-layer model"},
      {{"--compare", "greedy", "dola=0,5"}, "layer 5"},
      {{"--strategy", "dola=middle"}, "dola=middle is not low, high or a layer number"},
      {{"--strategy", "dola=1,1"}, "dola layer 1 given twice"},
      {{"--strategy", "dola=low,beams=2"}, "dola cannot be combined with beams"},
      {{"--strategy", "dola=low,contrastive=4"}, "dola cannot be combined with contrastive"},
      {{"--strategy", "dola=low", "--temperature", "0.7"}, "conflict"},
  };
  for (const auto& [args, says] : cases) {
    std::string joined;
    for (const auto& a : args) joined += " " + a;
    expect_one_error_line(run_cli(with_tiny(args)), "tokenscope-cli", says, joined);
  }
}

}  // namespace

namespace {

// ---- speculative decoding ----

std::string tiny_dir() { return std::string(TS_FIXTURE_DIR) + "/tiny"; }

// The generated text of a --quiet run (its one output line).
std::string quiet_text(const CliRun& r) { return r.out; }

// Greedy speculative decoding prints the plain greedy text, with the target
// drafting for itself and at every draft length tried.
TEST(CliSpeculative, GreedyTextIsThePlainGreedyText) {
  const CliRun plain = run_cli(with_tiny({"--steps", "40", "--quiet"}));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  for (const char* strategy : {"spec=1", "spec=4", "spec=auto"}) {
    const CliRun r = run_cli(with_tiny(
        {"--steps", "40", "--quiet", "--strategy", strategy, "--draft-model", tiny_dir()}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(quiet_text(r), quiet_text(plain)) << strategy;
  }
}

// Each round is printed: drafts with q and p, the verdict, what was committed,
// the slots released and both sides' cost.
TEST(CliSpeculative, StepsPrintTheRound) {
  const CliRun r =
      run_cli(with_tiny({"--steps", "8", "--strategy", "spec=3,top_k=5,temperature=1.5,seed=2",
                         "--draft-model", tiny_dir()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("draft model tiny"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("speculative round: drafted 3, accepted 3, then bonus"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(" p/q 1.000 u "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("committed 4 tokens:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cost: draft 3 passes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("verify 1 pass of 4 tokens"), std::string::npos) << r.out;
}

// --compare: speculative lanes beside a plain one, with acceptance rate and
// tokens per target pass in the summary.
TEST(CliSpeculative, CompareSummaryHasAcceptanceAndTokensPerPass) {
  const CliRun r = run_cli(with_tiny({"--steps", "12", "--compare", "greedy", "spec=4", "spec=auto",
                                      "--draft-model", tiny_dir()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = lines_of(r.out);
  int summary = -1;
  for (int i = 0; i < static_cast<int>(lines.size()); ++i)
    if (starts_with(lines[i], "lane  strategy")) summary = i;
  ASSERT_GE(summary, 0) << r.out;
  EXPECT_NE(lines[summary].find("accept  tok/pass"), std::string::npos);
  ASSERT_LT(summary + 3, static_cast<int>(lines.size()));
  // The plain lane has no rounds; the target drafting for itself accepts all.
  EXPECT_NE(lines[summary + 1].find("     -         -  "), std::string::npos) << lines[summary + 1];
  EXPECT_NE(lines[summary + 2].find("  1.00  "), std::string::npos) << lines[summary + 2];
  EXPECT_NE(lines[summary + 3].find("  1.00  "), std::string::npos) << lines[summary + 3];
  // Same text in every lane (greedy, verified greedily).
  std::vector<std::string> texts;
  for (const std::string& l : lines)
    if (starts_with(l, "lane ") && l.find("): ") != std::string::npos)
      texts.push_back(l.substr(l.find("): ") + 3));
  ASSERT_EQ(texts.size(), 3u) << r.out;
  EXPECT_EQ(texts[1], texts[0]);
  EXPECT_EQ(texts[2], texts[0]);
}

// --json: every round with its drafts, verdict, committed tokens, KV work and costs.
TEST(CliSpeculative, JsonHasTheRounds) {
  const fs::path file = scratch_dir() / "spec.json";
  const CliRun r = run_cli(with_tiny({"--steps", "10", "--strategy", "spec=2,top_k=4,seed=9",
                                      "--draft-model", tiny_dir(), "--json", file.string()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(read_file(file));
  int rounds = 0;
  size_t committed = 0;
  for (const auto& step : doc.at("steps")) {
    const auto& lane = step.at("lanes").at(0);
    if (!lane.contains("speculative")) continue;
    ++rounds;
    const auto& s = lane.at("speculative");
    EXPECT_EQ(s.at("drafts").size(), s.at("gamma").get<size_t>());
    EXPECT_EQ(s.at("verify_rows").get<int>(), s.at("gamma").get<int>() + 1);
    EXPECT_TRUE(s.at("draft_cost").contains("flops"));
    EXPECT_GT(s.at("verify_cost").at("seconds").get<double>(), 0);
    EXPECT_EQ(lane.at("draw").at("by_speculative_round"), true);
    EXPECT_EQ(lane.at("params").at("spec_gamma"), 2);
    committed += s.at("committed").size();
  }
  EXPECT_GT(rounds, 1);
  EXPECT_EQ(committed + 1, 11u);  // the prefill's token and the rounds' fill --steps + 1
}

// A copy of the tiny fixture whose vocab.json gives ids `a` and `b` each
// other's token: the same vocabulary size, other ids.
fs::path tiny_with_swapped_ids(int a, int b) {
  const fs::path src = tiny_dir();
  const fs::path dir = scratch_dir() / "swapped";
  fs::create_directories(dir);
  for (const char* f : {"config.json", "merges.txt", "model.safetensors"})
    fs::copy_file(src / f, dir / f, fs::copy_options::overwrite_existing);
  nlohmann::json vocab = nlohmann::json::parse(read_file(src / "vocab.json"));
  for (auto& [token, id] : vocab.items()) {
    if (id.get<int>() == a)
      id = b;
    else if (id.get<int>() == b)
      id = a;
  }
  std::ofstream(dir / "vocab.json") << vocab.dump();
  return dir;
}

// The tiny fixture written as an llm.c checkpoint (fp32: a header of 256
// int32, then the tensors in llm.c's order, matrices [out, in]) at `file`,
// with no tokenizer files beside it.
void write_tiny_as_llmc(const fs::path& file) {
  const std::string st = read_file(fs::path(tiny_dir()) / "model.safetensors");
  uint64_t header_len = 0;
  std::memcpy(&header_len, st.data(), 8);
  const nlohmann::json header = nlohmann::json::parse(st.substr(8, header_len));
  const char* data = st.data() + 8 + header_len;
  auto tensor = [&](const std::string& name) {
    const nlohmann::json& t = header.at(name);
    const size_t begin = t["data_offsets"][0], end = t["data_offsets"][1];
    std::vector<float> v((end - begin) / sizeof(float));
    std::memcpy(v.data(), data + begin, end - begin);
    return v;
  };
  auto transposed = [&](const std::string& name) {  // HF's [in, out] to [out, in]
    const size_t rows = header.at(name)["shape"][0], cols = header.at(name)["shape"][1];
    const std::vector<float> v = tensor(name);
    std::vector<float> t(v.size());
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < cols; ++c) t[c * rows + r] = v[r * cols + c];
    return t;
  };
  const nlohmann::json cfg = nlohmann::json::parse(read_file(fs::path(tiny_dir()) / "config.json"));
  const int layers = cfg["n_layer"];
  std::vector<int32_t> head(256, 0);
  head[0] = 20240326;  // llm.c's magic
  head[1] = 3;         // fp32
  head[2] = cfg["n_positions"];
  head[3] = cfg["vocab_size"];
  head[4] = layers;
  head[5] = cfg["n_head"];
  head[6] = cfg["n_embd"];
  head[7] = cfg["vocab_size"];  // no padding rows
  fs::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::binary);
  auto put = [&out](const std::vector<float>& v) {
    out.write(reinterpret_cast<const char*>(v.data()),
              static_cast<std::streamsize>(v.size() * sizeof(float)));
  };
  out.write(reinterpret_cast<const char*>(head.data()), 256 * sizeof(int32_t));
  put(tensor("wte.weight"));
  put(tensor("wpe.weight"));
  const std::pair<const char*, bool> per_layer[] = {
      {"ln_1.weight", false},      {"ln_1.bias", false},         {"attn.c_attn.weight", true},
      {"attn.c_attn.bias", false}, {"attn.c_proj.weight", true}, {"attn.c_proj.bias", false},
      {"ln_2.weight", false},      {"ln_2.bias", false},         {"mlp.c_fc.weight", true},
      {"mlp.c_fc.bias", false},    {"mlp.c_proj.weight", true},  {"mlp.c_proj.bias", false}};
  for (const auto& [name, matrix] : per_layer)
    for (int l = 0; l < layers; ++l) {
      const std::string n = "h." + std::to_string(l) + "." + name;
      put(matrix ? transposed(n) : tensor(n));
    }
  put(tensor("ln_f.weight"));
  put(tensor("ln_f.bias"));
}

// A draft whose tokenizer has the target's size but other ids is refused in
// one line naming the first id that differs, in the CLI and the bench.
TEST(CliSpeculative, DraftWithOtherIdsIsRefusedNamingTheFirstId) {
  const std::string swapped = tiny_with_swapped_ids(5, 6).string();
  // Ids 5 and 6 are "&" and "'" in the fixture's vocabulary.
  const std::string says = "draft model: its token 5 is \"'\" but the target's is \"&\"";
  expect_one_error_line(
      run_cli(with_tiny({"--strategy", "spec=2", "--draft-model", swapped, "--steps", "2"})),
      "tokenscope-cli", says, "cli");
  if (!fs::exists(bench_path())) GTEST_SKIP() << bench_path() << " is not built";
  expect_one_error_line(run_program(bench_path().string(), {"--model", tiny_dir(), "--draft-model",
                                                            swapped, "--spec-only"}),
                        "tokenscope-bench", says, "bench");
}

// An llm.c draft (no tokenizer in the file, none beside it) uses the target's
// tokenizer: the fixture as llm.c drafting for the fixture, and for itself
// as an llm.c target, gives the plain greedy text.
TEST(CliSpeculative, LlmcDraftUsesTheTargetsTokenizer) {
  const fs::path bin = scratch_dir() / "llmc" / "tiny.bin";
  write_tiny_as_llmc(bin);
  const CliRun plain = run_cli(with_tiny({"--steps", "20", "--quiet"}));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const CliRun r = run_cli(with_tiny(
      {"--steps", "20", "--quiet", "--strategy", "spec=3", "--draft-model", bin.string()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, plain.out);
  const CliRun both = run_cli({"--model", bin.string(), "--tokenizer", tiny_dir(), "--steps", "20",
                               "--quiet", "--strategy", "spec=3", "--draft-model", bin.string()});
  ASSERT_EQ(both.exit_code, 0) << both.err;
  EXPECT_EQ(both.out, plain.out);
}

// The bench's --spec-self-draft on an llm.c model: --tokenizer DIR gives the
// speculative section its prompt's tokenizer (the draft, the same file, uses
// it too); without it the one line says to pass it.
TEST(CliSpeculative, BenchSelfDraftOnAnLlmcModel) {
  if (!fs::exists(bench_path())) GTEST_SKIP() << bench_path() << " is not built";
  const fs::path bin = scratch_dir() / "llmc" / "tiny.bin";
  write_tiny_as_llmc(bin);
  const CliRun r =
      run_program(bench_path().string(),
                  {"--model", bin.string(), "--tokenizer", tiny_dir(), "--spec-self-draft",
                   "--spec-only", "--spec-gamma", "2", "--spec-tokens", "12"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  const auto& runs = doc.at("speculative").at("pairs").at(0).at("runs");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].at("same_tokens_as_plain"), true);
  EXPECT_DOUBLE_EQ(runs[0].at("acceptance_rate").get<double>(), 1.0);
  expect_one_error_line(run_program(bench_path().string(),
                                    {"--model", bin.string(), "--spec-self-draft", "--spec-only"}),
                        "tokenscope-bench", "pass --tokenizer DIR", "no tokenizer");
  // Only the speculative section reads text: --tokenizer alone is refused.
  expect_one_error_line(
      run_program(bench_path().string(), {"--model", tiny_dir(), "--tokenizer", tiny_dir()}),
      "tokenscope-bench", "--tokenizer: only the speculative section", "tokenizer alone");
}

TEST(CliSpeculative, BadInputIsOneLine) {
  const std::string bundled =
      (fs::path(TS_FIXTURE_DIR).parent_path().parent_path() / "assets/models/tokenscope-tiny")
          .string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--strategy", "spec=4"}, "spec=4 needs --draft-model DIR"},
      {{"--draft-model", tiny_dir()}, "--draft-model needs a speculative lane"},
      {{"--strategy", "spec=17", "--draft-model", tiny_dir()},
       "spec=17 is not a whole number from 1 to 16 or auto"},
      {{"--strategy", "spec=0", "--draft-model", tiny_dir()}, "spec=0"},
      {{"--strategy", "spec=4,beams=2", "--draft-model", tiny_dir()},
       "spec cannot be combined with beams"},
      {{"--strategy", "spec=4", "--draft-model", tiny_dir(), "--no-kv-cache"},
       "--no-kv-cache and spec=4 conflict"},
      {{"--strategy", "spec=4", "--draft-model", tiny_dir(), "--draft-model", tiny_dir()},
       "--draft-model is given twice"},
      {{"--strategy", "spec=4", "--draft-model", "/nonexistent-draft"}, "/nonexistent-draft"},
      // The bundled model's vocabulary (8192) is not the fixture's (457).
      {{"--strategy", "spec=4", "--draft-model", bundled}, "8192 tokens but the target's has 457"},
  };
  for (const auto& [args, says] : cases) {
    std::string joined;
    for (const auto& a : args) joined += " " + a;
    expect_one_error_line(run_cli(with_tiny(args)), "tokenscope-cli", says, joined);
  }
}

}  // namespace

namespace {

// tokenscope-bench --draft-model: speculative against plain greedy decoding,
// the same tokens, with alpha, c and the predicted speed-up beside the measured one.
TEST(CliSpeculative, BenchComparesSpeculativeWithPlainDecoding) {
  const std::string tiny = std::string(TS_FIXTURE_DIR) + "/tiny";
  const CliRun r = run_program(
      bench_path().string(),
      {"--model", tiny, "--draft-model", tiny, "--spec-gamma", "1,3", "--spec-tokens", "24",
       "--lanes", "1", "--decode-steps", "2", "--prefill-tokens", "8", "--context", "8"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  const auto& runs = doc.at("speculative").at("pairs").at(0).at("runs");
  ASSERT_EQ(runs.size(), 2u);
  for (const auto& run : runs) {
    EXPECT_EQ(run.at("same_tokens_as_plain"), true);
    EXPECT_EQ(run.at("tokens"), 24);
    EXPECT_DOUBLE_EQ(run.at("acceptance_rate").get<double>(), 1.0);
    const double g = run.at("gamma").get<double>(), c = run.at("draft_to_target_cost_c");
    EXPECT_GT(c, 0);
    // alpha = 1: the formula's limit (g + 1) / (g c + 1).
    EXPECT_NEAR(run.at("speedup_predicted").get<double>(), (g + 1) / (g * c + 1), 1e-9);
    EXPECT_GT(run.at("plain_tokens_per_s").get<double>(), 0);
    EXPECT_GT(run.at("speculative_tokens_per_s").get<double>(), 0);
  }
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--model", tiny, "--draft-model", tiny, "--spec-gamma", "17"}, "at most 16"},
      {{"--model", tiny, "--spec-gamma", "4"}, "--spec-gamma needs --draft-model DIR"},
      {{"--model", tiny, "--spec-tokens", "4"}, "--spec-tokens needs --draft-model DIR"},
  };
  for (const auto& [args, says] : bad)
    expect_one_error_line(run_program(bench_path().string(), args), "tokenscope-bench", says,
                          args.back());
}

// --spec-only --spec-self-draft: only the speculative section, the model
// drafting for itself, spec=auto beside a fixed g; a pair whose vocabularies
// differ is refused in one line before any measurement.
TEST(CliSpeculative, BenchSpeculativeOnlyWithSelfDraftAndAuto) {
  const std::string tiny = std::string(TS_FIXTURE_DIR) + "/tiny";
  const CliRun r =
      run_program(bench_path().string(), {"--model", tiny, "--spec-self-draft", "--spec-only",
                                          "--spec-gamma", "2,auto", "--spec-tokens", "20"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  EXPECT_FALSE(doc.contains("prefill"));
  EXPECT_EQ(doc.at("speculative").at("outputs_identical"), true);
  const auto& pairs = doc.at("speculative").at("pairs");
  ASSERT_EQ(pairs.size(), 1u);
  EXPECT_EQ(pairs[0].at("pair"), "model/self");
  const auto& runs = pairs[0].at("runs");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[1].at("gamma"), "auto");
  for (const auto& run : runs) {
    EXPECT_EQ(run.at("same_tokens_as_plain"), true);
    EXPECT_EQ(run.at("tokens"), 20);
    EXPECT_DOUBLE_EQ(run.at("acceptance_rate").get<double>(), 1.0);
    EXPECT_GT(run.at("speedup_predicted").get<double>(), 0);
  }
  EXPECT_NE(r.err.find("outputs identical: yes"), std::string::npos) << r.err;
  const std::string bundled =
      (fs::path(TS_FIXTURE_DIR).parent_path().parent_path() / "assets/models/tokenscope-tiny")
          .string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--model", tiny, "--draft-model", bundled, "--spec-only"},
       "8192 tokens but the target's has 457"},
      {{"--model", tiny, "--spec-only"},
       "--spec-only needs --draft-model DIR or --spec-self-draft"},
      {{"--model", tiny, "--spec-self-draft", "--spec-gamma", "4,autox"}, "'autox'"},
      {{"--model", tiny, "--spec-self-draft=yes"}, "--spec-self-draft"},
      {{"--model", tiny, "--spec-self-draft", "--spec-tokens", "1"},
       "--spec-tokens: 1 is out of range"},
      {{"--spec-random-pairs", "/tmp/x", "--model", tiny}, "give no --model"},
  };
  for (const auto& [args, says] : bad)
    expect_one_error_line(run_program(bench_path().string(), args), "tokenscope-bench", says,
                          args.back());
}

// ---- --quiz and b: stepping back takes that step's guess out of the score ----

TEST(CliQuiz, BackUndoesTheStepsGuessAndARedoScoresOnce) {
  // Prefill, guess option 1; decode, guess option 3; back; the same decode
  // again, guess option 3 again; quit.
  const std::string input = "\n1\n\n3\nb\n\n3\nq\n";
  const CliRun r = run_program(
      TS_CLI_PATH, with_tiny({"--interactive", "--quiz", "--prompt", "The cat sat on"}), &input);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> scores;
  for (const std::string& line : lines_of(r.out))
    if (line.find("quiz score: ") != std::string::npos) scores.push_back(line);
  // One score line per step and one after the back.
  ASSERT_EQ(scores.size(), 4u) << r.out;
  EXPECT_NE(scores[0].find("quiz score: 1 guess,"), std::string::npos) << scores[0];
  EXPECT_NE(scores[1].find("quiz score: 2 guesses,"), std::string::npos) << scores[1];
  // After the back: the first step's score again, to the digit.
  EXPECT_EQ(scores[2], scores[0]);
  // The step redone with the same guess (greedy: the same logits) is counted
  // once: the score is the one it had the first time.
  EXPECT_EQ(scores[3], scores[1]);
  EXPECT_EQ(r.out.find("3 guesses"), std::string::npos) << r.out;
}

}  // namespace

// ------------------------------------------- listed words are never printed

namespace {

// Entries of the shipped list that occur in `text` as whole words
// (case-insensitive, the display's ␣ read as a space).
std::vector<std::string> listed_words_in(std::string text) {
  for (size_t at = text.find("\u2423"); at != std::string::npos; at = text.find("\u2423", at))
    text.replace(at, 3, " ");
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  std::vector<std::string> found;
  std::ifstream in(fs::path(TS_FIXTURE_DIR).parent_path().parent_path() /
                   "assets/banned_words/en.txt");
  for (std::string e; std::getline(in, e);) {
    if (e.empty() || e[0] == '#') continue;
    for (char& c : e) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (size_t at = text.find(e); at != std::string::npos; at = text.find(e, at + 1)) {
      const bool left = at == 0 || !alnum(text[at - 1]) || !alnum(e.front());
      const bool right =
          at + e.size() == text.size() || !alnum(text[at + e.size()]) || !alnum(e.back());
      if (left && right) {
        found.push_back(e);
        break;
      }
    }
  }
  return found;
}

}  // namespace

// With the stage on (the bundled model's default), each step lists the
// tokens it removed, and the model's own top-5 and logit lens may still rank
// them: every such listed word is printed masked, never whole.
TEST(CliBannedWords, RemovedWordsArePrintedMasked) {
  const CliRun r = run_cli(
      {"--prompt", "She looked at him and said", "--steps", "6", "--top", "20", "--logit-lens"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_NE(r.out.find("tokens removed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("most likely: \""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("*"), std::string::npos) << r.out;  // the masked list
  const std::vector<std::string> found = listed_words_in(r.out);
  EXPECT_TRUE(found.empty()) << found.size() << " listed words printed, e.g. \"" << found[0]
                             << "\"";
  // The checker finds a listed word where one is printed whole (the list's
  // first entry, capitalised after the display's space mark).
  std::ifstream in(fs::path(TS_FIXTURE_DIR).parent_path().parent_path() /
                   "assets/banned_words/en.txt");
  std::string first;
  while (std::getline(in, first) && (first.empty() || first[0] == '#')) {
  }
  ASSERT_FALSE(first.empty());
  first[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(first[0])));
  std::string line = "top: \"\u2423";
  line += first;
  line += "\" 0.1";
  EXPECT_FALSE(listed_words_in(line).empty());
}

namespace {

// Every strategy runs on a Llama-family fixture (grouped-query attention,
// RoPE, SwiGLU), the speculative lane with the same model as its draft; the
// prompt is the PyTorch reference's "short" case (its bytes spell those ids:
// checked from the session file), so greedy's first token is the reference's.
TEST(CliLlama, EveryStrategyRunsAndGreedyMatchesTheReference) {
  for (const char* model : {"llama-gqa2", "qwen2-mha"}) {
    SCOPED_TRACE(model);
    const std::string dir = std::string(TS_FIXTURE_DIR) + "/llama/" + model;
    const nlohmann::json ref = nlohmann::json::parse(read_file(fs::path(dir) / "reference.json"));
    const nlohmann::json& short_case = ref["cases"][0];
    ASSERT_EQ(short_case["name"], "short");
    const fs::path file = scratch_dir() / (std::string(model) + ".json");
    const CliRun r = run_cli(
        {"--model", dir, "--draft-model", dir, "--prompt", "@\x9c(<|endoftext|>\xa9y at", "--steps",
         "3", "--json", file.string(), "--compare", "greedy", "temperature=1.0,seed=3", "beams=2",
         "contrastive=4,alpha=0.6", "dola=low", "lookahead", "prompt_lookup", "spec=2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(error_lines(r).empty()) << r.err;
    const nlohmann::json doc = nlohmann::json::parse(read_file(file));
    std::vector<int> prompt_ids;
    for (const auto& t : doc["prompt_tokens"]) prompt_ids.push_back(t["id"].get<int>());
    ASSERT_EQ(prompt_ids, short_case["token_ids"].get<std::vector<int>>());
    ASSERT_EQ(doc["lanes"].size(), 8u);
    for (const auto& lane : doc["lanes"]) EXPECT_FALSE(lane["generated"].empty()) << lane.dump();
    EXPECT_EQ(doc["lanes"][0]["generated"][0], short_case["greedy_next"]);
    EXPECT_EQ(doc["model"]["family"],
              std::string(model).substr(0, 5) == "qwen2" ? "qwen2" : "llama");
  }
}

}  // namespace

namespace {

// ---- --kv q8 ----

// A Llama directory (RoPE, SwiGLU, 4 query heads on 2 KV heads of 32 values,
// tied embeddings) with seeded random F32 weights beside the llama-gqa2
// fixture's tokenizer: the fixtures' own heads (5 to 8 values) cannot take q8.
fs::path write_q8_llama() {
  const fs::path fixture = fs::path(TS_FIXTURE_DIR) / "llama/llama-gqa2";
  const fs::path dir = scratch_dir() / "q8-llama";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* f : {"vocab.json", "merges.txt"}) fs::copy_file(fixture / f, dir / f);
  nlohmann::json cfg = nlohmann::json::parse(read_file(fixture / "config.json"));
  const int64_t vocab = cfg["vocab_size"], c = 128, q = 4 * 32, kv = 2 * 32, inner = 96;
  cfg["hidden_size"] = c;
  cfg["num_attention_heads"] = 4;
  cfg["num_key_value_heads"] = 2;
  cfg["intermediate_size"] = inner;
  cfg["tie_word_embeddings"] = true;
  std::ofstream(dir / "config.json") << cfg.dump();
  uint32_t state = 12345;  // a linear congruential generator: uniform in [-a, a]
  auto uniform = [&](float a) {
    state = state * 1664525u + 1013904223u;
    return a * (float(state >> 8) / float(1 << 23) - 1.0f);
  };
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float a, float mean) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    const size_t begin = data.size();
    for (int64_t i = 0; i < n; ++i) {
      const float v = mean + uniform(a);
      data.append(reinterpret_cast<const char*>(&v), 4);
    }
    header[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {begin, data.size()}}};
  };
  add("model.embed_tokens.weight", {vocab, c}, 1.5f, 0.0f);
  add("model.norm.weight", {c}, 0.1f, 1.0f);
  for (int l = 0; l < cfg["num_hidden_layers"].get<int>(); ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {c}, 0.1f, 1.0f);
    add(p + "post_attention_layernorm.weight", {c}, 0.1f, 1.0f);
    add(p + "self_attn.q_proj.weight", {q, c}, 0.4f, 0.0f);
    add(p + "self_attn.k_proj.weight", {kv, c}, 0.4f, 0.0f);
    add(p + "self_attn.v_proj.weight", {kv, c}, 0.2f, 0.0f);
    add(p + "self_attn.o_proj.weight", {c, q}, 0.2f, 0.0f);
    add(p + "mlp.gate_proj.weight", {inner, c}, 0.2f, 0.0f);
    add(p + "mlp.up_proj.weight", {inner, c}, 0.2f, 0.0f);
    add(p + "mlp.down_proj.weight", {c, inner}, 0.2f, 0.0f);
  }
  std::string h = header.dump();
  while (h.size() % 8 != 0) h += ' ';
  std::ofstream out(dir / "model.safetensors", std::ios::binary);
  const uint64_t len = h.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << h << data;
  return dir;
}

// --kv q8 on the bundled model and on a grouped-query Llama: a clean run to
// the last step, the memory report names the format, and the greedy
// continuation is f32's (the bundled model's 96 greedy steps agree in
// kv_format_test; this random Llama's logits differ by at most 0.15 there).
TEST(CliKvQ8, TheBundledModelAndAGqaLlamaRunCleanly) {
  const fs::path llama = write_q8_llama();
  for (const std::vector<std::string>& model :
       {std::vector<std::string>{}, std::vector<std::string>{"--model", llama.string()}}) {
    const std::string which = model.empty() ? "bundled" : "llama";
    SCOPED_TRACE(which);
    nlohmann::json generated[2];
    for (const char* kv : {"f32", "q8"}) {
      const fs::path file = scratch_dir() / ("kv-" + std::string(kv) + "-" + which + ".json");
      std::vector<std::string> args = model;
      for (const char* a : {"--prompt", "the cat sat on the mat", "--steps", "16", "--device",
                            "cpu", "--memory", "--kv", kv})
        args.push_back(a);
      args.insert(args.end(), {"--json", file.string()});
      const CliRun r = run_cli(args);
      ASSERT_EQ(r.exit_code, 0) << kv << "\n" << r.err;
      EXPECT_TRUE(error_lines(r).empty()) << kv << "\n" << r.err;
      EXPECT_NE(
          r.out.find(std::string(" ") + (kv == std::string("f32") ? "fp32" : kv) + " reserved"),
          std::string::npos)
          << r.out;
      const nlohmann::json doc = nlohmann::json::parse(read_file(file));
      ASSERT_EQ(doc["lanes"].size(), 1u);
      generated[kv == std::string("q8")] = doc["lanes"][0]["generated"];
    }
    EXPECT_GE(generated[1].size(), 16u) << generated[1].dump();
    EXPECT_EQ(generated[1], generated[0]);
  }
}

// --kv q8 where it cannot run, and a format --kv does not take: one line each.
TEST(CliKvQ8, RefusalsAreOneLine) {
  const std::string gqa2 = std::string(TS_FIXTURE_DIR) + "/llama/llama-gqa2";
  expect_one_error_line(run_cli({"--model", gqa2, "--kv", "q8", "--steps", "2"}), "tokenscope-cli",
                        "--kv q8: the model's head_dim 8 is not a multiple of 32", "head_dim 8");
  expect_one_error_line(run_cli(with_tiny({"--kv", "q4"})), "tokenscope-cli",
                        "--kv: expected f32, f16, bf16 or q8, got 'q4'", "--kv q4");
  expect_one_error_line(run_cli(with_tiny({"--kv", "q8", "--device", "cuda"})), "tokenscope-cli",
                        "--kv q8: the CUDA backend keeps its KV cache in f32 only", "cuda");
  EXPECT_NE(run_cli({"--help"}).out.find("--kv f32|f16|bf16|q8"), std::string::npos);
  EXPECT_NE(run_bench({"--help"}).out.find("--kv f32|f16|bf16|q8"), std::string::npos);
}

}  // namespace
