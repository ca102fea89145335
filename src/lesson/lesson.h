#pragma once
// Guided lessons: a small text file, one section per step (the words to read,
// the panel to point at, the action that lets the class go on, an optional
// question and its answer). The format is documented in docs/lessons.md.
// This is the parser only: plain C++, no window; the app checks the actions.
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace ts::lesson {

// What a step waits for before Next is enabled.
enum class ActionKind {
  kNext,          // nothing: read, then Next
  kStep,          // one step of the model (prefill or decode): Space, Page Down, Step
  kPrefill,       // the prefill has run
  kBack,          // one step back
  kGreedy,        // "Choosing the next token" set to greedy
  kTemperature,   // sampling at temperature `value`
  kTopP,          // sampling with top-p `value`
  kTopK,          // sampling with top-k `value` (a whole number)
  kKvCache,       // the Step control's KV cache box set to `on`
  kClickToken,    // a token chosen in the token strip or the attention map
  kCacheCompare,  // "KV cache on vs off" run (Run both ways)
  kCompare,       // a comparison finished in the Compare panel (two formats or two models)
  kBatchSweep,    // a batch sweep finished in the Roofline panel
};

struct Action {
  ActionKind kind = ActionKind::kNext;
  double value = 0;  // temperature, top-p, top-k
  bool on = false;   // kv_cache on / off
};

// The action as a lesson file writes it ("temperature 0.7", "kv_cache off").
std::string action_text(const Action& a);
// What the class is asked to do, in words ("set the temperature to 0.7").
std::string action_request(const Action& a);

struct Step {
  int line = 0;       // where its [step] header is in the file
  std::string text;   // the words to read (paragraphs separated by "\n\n")
  std::string panel;  // the panel key to outline; empty: none
  Action action;
  std::string question;  // optional
  std::string answer;    // optional, only with a question
};

struct Lesson {
  std::string source;  // the file name, for messages
  std::string title;
  std::string prompt;  // optional: set when the lesson starts
  std::string layout;  // optional: applied when the lesson starts
  // Optional: the model the Compare panel compares with the session's when
  // the lesson starts (its two-models mode), as found when it was read.
  std::filesystem::path compare_model;
  std::vector<Step> steps;
};

// The names a lesson may use, from the program that shows it.
struct Vocabulary {
  std::vector<std::string> panels;
  std::vector<std::string> layouts;
  // Where a compare_model given as a bare name (no '/') is looked for, in
  // order (the window's models folders); a path is taken relative to the
  // lesson file's folder.
  std::vector<std::filesystem::path> model_dirs;
};

// A lesson file is at most this large (a lesson is a few kilobytes).
inline constexpr std::size_t kMaxLessonBytes = 64 * 1024;
// A step's text (its text: lines joined) is at most this long: the bar at the
// bottom of the window shows a few lines; a longer step belongs in several.
inline constexpr std::size_t kMaxStepTextBytes = 4096;
// A question, and an answer, each at most this long.
inline constexpr std::size_t kMaxQuestionBytes = 1000;

// Parses a lesson. Throws ts::Error with one line, "SOURCE:LINE: what is
// wrong" (or "SOURCE: ..." for the file as a whole).
Lesson parse_lesson(std::string_view text, const std::string& source, const Vocabulary& vocab);

// Reads and parses a lesson file (a regular file of at most kMaxLessonBytes).
Lesson load_lesson(const std::filesystem::path& path, const Vocabulary& vocab);

// The *.lesson files in `dir`, sorted by name; empty when there is no such folder.
std::vector<std::filesystem::path> list_lessons(const std::filesystem::path& dir);

}  // namespace ts::lesson
