// The command-line rules shared by tokenscope-cli, the window and the bench.
#include <gtest/gtest.h>

#include <functional>

#include <string>
#include <vector>

#include "session/model_flags.h"
#include "util/error.h"

namespace ts {
namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ModelFlags, EqualsFormAndSeparateValueAreTheSame) {
  const char* argv[] = {"prog",         "--model=a b", "--threads", "2",
                        "--device=cpu", "--tokenizer", "tok"};
  FlagReader r(7, argv);
  ModelSetupOptions setup;
  while (r.next()) ASSERT_TRUE(parse_model_flag(r, setup)) << r.flag();
  EXPECT_EQ(setup.model, "a b");
  EXPECT_EQ(setup.cpu_threads, 2);
  EXPECT_EQ(setup.device, "cpu");
  EXPECT_EQ(setup.tokenizer, "tok");
}

TEST(ModelFlags, ErrorsNameTheFlagAndTheBound) {
  auto parse = [](std::vector<const char*> args) {
    args.insert(args.begin(), "prog");
    FlagReader r(static_cast<int>(args.size()), args.data());
    ModelSetupOptions setup;
    while (r.next())
      if (!parse_model_flag(r, setup)) throw Error("unknown " + r.flag());
  };
  const std::string max = std::to_string(max_cpu_threads());
  EXPECT_EQ(error_of([&] {
              parse({"--threads", "100000"});
            }),
            "--threads: 100000 is out of range, at most " + max);
  EXPECT_EQ(error_of([&] { parse({"--threads=99999999999999999999"}); }),
            "--threads: 99999999999999999999 is out of range, at most " + max);
  EXPECT_EQ(error_of([&] {
              parse({"--threads", "-1"});
            }),
            "--threads: -1 is out of range, at least 0");
  EXPECT_EQ(error_of([&] { parse({"--threads", "2x"}); }), "--threads: '2x' is not a whole number");
  EXPECT_EQ(error_of([&] { parse({"--model", ""}); }), "--model: the value is empty");
  EXPECT_EQ(error_of([&] { parse({"--tokenizer="}); }), "--tokenizer: the value is empty");
  EXPECT_EQ(error_of([&] {
              parse({"--device", "gpu"});
            }),
            "--device: expected auto, cpu or cuda, got 'gpu'");
  EXPECT_EQ(error_of([&] { parse({"--model"}); }), "--model needs a value (see --help)");
  EXPECT_NE(error_of([&] {
              parse({"--model", "--device"});
            }).find("--model needs a value, got the option '--device'"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { parse({"--model=--odd"}); }), "(no error)");
}

TEST(ModelFlags, NumbersAndLists) {
  EXPECT_EQ(parse_whole_number("--n", "2147483647", 0, 2147483647), 2147483647);
  EXPECT_EQ(error_of([] { parse_whole_number("--n", "2147483648", 0, 2147483647); }),
            "--n: 2147483648 is out of range, at most 2147483647");
  EXPECT_EQ(error_of([] { parse_whole_number("--n", "", 0, 5); }), "--n: '' is not a whole number");
  EXPECT_FLOAT_EQ(parse_decimal("--t", "0.5"), 0.5f);
  EXPECT_EQ(error_of([] { parse_decimal("--t", "1e99"); }),
            "--t: 1e99 is out of the range of a float");
  EXPECT_EQ(error_of([] { parse_decimal("--t", "inf"); }),
            "--t: inf is out of the range of a float");
  EXPECT_EQ(error_of([] { parse_decimal("--t", "x"); }), "--t: 'x' is not a number");

  const char* argv[] = {"prog", "--compare", "a", "b", "--quiet=1", "--compare=c"};
  FlagReader r(6, argv);
  ASSERT_TRUE(r.next());
  EXPECT_EQ(r.values_up_to_next_flag(), (std::vector<std::string>{"a", "b"}));
  ASSERT_TRUE(r.next());
  EXPECT_EQ(r.flag(), "--quiet");
  EXPECT_EQ(error_of([&] { r.no_value(); }), "--quiet takes no value (got '1')");
  ASSERT_TRUE(r.next());
  EXPECT_EQ(r.values_up_to_next_flag(), (std::vector<std::string>{"c"}));
  EXPECT_FALSE(r.next());
}

TEST(ModelFlags, HelpNamesEveryModelFlag) {
  const std::string help = model_flags_help();
  for (const char* flag : {"--model", "--tokenizer", "--device", "--threads"})
    EXPECT_NE(help.find(flag), std::string::npos) << flag;
  EXPECT_NE(help.find("at most " + std::to_string(max_cpu_threads())), std::string::npos);
}

}  // namespace
}  // namespace ts
