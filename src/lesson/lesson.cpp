#include "lesson/lesson.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include "util/error.h"

namespace ts::lesson {

namespace {

constexpr int kMaxSteps = 200;

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t");
  return std::string(s.substr(first, last - first + 1));
}

// The line (1-based) of the first byte that is not valid UTF-8, or 0.
int first_bad_utf8_line(std::string_view t) {
  int line = 1;
  for (std::size_t i = 0; i < t.size();) {
    const auto c = static_cast<unsigned char>(t[i]);
    if (c == '\n') ++line;
    int extra = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      extra = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3;
      cp = c & 0x07;
    } else {
      return line;
    }
    if (i + extra >= t.size()) return line;  // cut off at the end
    for (int k = 1; k <= extra; ++k) {
      const auto d = static_cast<unsigned char>(t[i + k]);
      if ((d & 0xC0) != 0x80) return line;
      cp = (cp << 6) | (d & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[extra] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return line;
    i += extra + 1;
  }
  return 0;
}

bool parse_double(const std::string& s, double& out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  const auto [p, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && p == end && std::isfinite(out);
}

class Parser {
 public:
  Parser(std::string source, const Vocabulary& vocab) : source_(std::move(source)), vocab_(vocab) {}

  [[noreturn]] void fail(int line, const std::string& what) const {
    throw Error(source_ + ":" + std::to_string(line) + ": " + what);
  }
  [[noreturn]] void fail_file(const std::string& what) const { throw Error(source_ + ": " + what); }

  Action parse_action(int line, const std::string& value) const {
    std::istringstream in(value);
    std::string name, arg, extra;
    in >> name >> arg >> extra;
    if (!extra.empty()) fail(line, "action '" + name + "': one value at most, got '" + value + "'");
    Action a;
    struct Plain {
      const char* name;
      ActionKind kind;
    };
    static constexpr Plain kPlain[] = {{"next", ActionKind::kNext},
                                       {"step", ActionKind::kStep},
                                       {"prefill", ActionKind::kPrefill},
                                       {"back", ActionKind::kBack},
                                       {"greedy", ActionKind::kGreedy},
                                       {"click_token", ActionKind::kClickToken},
                                       {"cache_compare", ActionKind::kCacheCompare},
                                       {"compare", ActionKind::kCompare},
                                       {"batch_sweep", ActionKind::kBatchSweep}};
    for (const Plain& p : kPlain)
      if (name == p.name) {
        if (!arg.empty()) fail(line, "action '" + name + "' takes no value, got '" + arg + "'");
        a.kind = p.kind;
        return a;
      }
    auto number = [&](double lo, double hi, bool lo_open, const char* range) {
      if (arg.empty()) fail(line, "action '" + name + "' needs a value (" + range + ")");
      double v = 0;
      if (!parse_double(arg, v)) fail(line, name + ": '" + arg + "' is not a number");
      if (v > hi || v < lo || (lo_open && v == lo))
        fail(line, name + ": " + arg + " is out of range (" + range + ")");
      return v;
    };
    if (name == "temperature") {
      a.kind = ActionKind::kTemperature;
      a.value = number(0, 100, true, "more than 0, at most 100");
    } else if (name == "top_p") {
      a.kind = ActionKind::kTopP;
      a.value = number(0, 1, true, "more than 0, at most 1");
    } else if (name == "top_k") {
      a.kind = ActionKind::kTopK;
      a.value = number(1, 1000000, false, "a whole number from 1");
      if (a.value != std::floor(a.value)) fail(line, "top_k: '" + arg + "' is not a whole number");
    } else if (name == "kv_cache") {
      a.kind = ActionKind::kKvCache;
      if (arg != "on" && arg != "off")
        fail(line, "action 'kv_cache' needs on or off, got '" + arg + "'");
      a.on = arg == "on";
    } else {
      fail(line, "unknown action '" + name +
                     "' (next, step, prefill, back, greedy, temperature X, top_p X, top_k N, "
                     "kv_cache on|off, click_token, cache_compare, compare, batch_sweep)");
    }
    return a;
  }

  // A bare name is a folder in one of the models folders (the first that has
  // it), else beside the lesson; a path is relative to the lesson's folder.
  std::filesystem::path find_model(int line, const std::string& value) const {
    namespace fs = std::filesystem;
    const fs::path lesson_dir = fs::path(source_).parent_path();
    const fs::path given(value);
    std::vector<fs::path> tried;
    if (value.find('/') == std::string::npos)
      for (const fs::path& d : vocab_.model_dirs) tried.push_back(d / given);
    tried.push_back(given.is_absolute() ? given : lesson_dir / given);
    for (fs::path& p : tried) p = p.lexically_normal();  // "./m" and "../x/m" read plainly
    std::error_code ec;
    for (const fs::path& p : tried)
      if (fs::exists(p, ec)) return p;
    std::string where;
    for (const fs::path& p : tried) where += (where.empty() ? "" : ", ") + p.string();
    fail(line, "compare_model: no model '" + value + "' (looked for " + where + ")");
  }

  Lesson parse(std::string_view text) {
    // A UTF-8 byte order mark (some Windows editors write one) is not text.
    if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
    if (text.size() > kMaxLessonBytes)
      fail_file("larger than " + std::to_string(kMaxLessonBytes) + " bytes; is it a lesson file?");
    if (const auto nul = text.find('\0'); nul != std::string_view::npos)
      fail(static_cast<int>(std::count(text.begin(), text.begin() + nul, '\n')) + 1,
           "contains a NUL byte; is it a text file?");
    if (const int bad = first_bad_utf8_line(text); bad > 0) fail(bad, "not valid UTF-8 text");
    Lesson l;
    l.source = source_;
    Step* step = nullptr;
    std::vector<std::string> seen;  // keys given once, in the header or the current step
    bool text_break = false;        // an empty "text:" starts a new paragraph
    int line_no = 0;
    bool any = false;
    std::size_t pos = 0;
    while (pos <= text.size()) {
      const std::size_t nl = text.find('\n', pos);
      std::string_view raw =
          text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
      pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
      ++line_no;
      if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
      const std::string line = trim(raw);
      if (line.empty() || line[0] == '#') continue;
      any = true;
      if (line[0] == '[') {
        if (line != "[step]") fail(line_no, "unknown section '" + line + "' (only [step])");
        if (static_cast<int>(l.steps.size()) >= kMaxSteps)
          fail(line_no, "more than " + std::to_string(kMaxSteps) + " steps");
        l.steps.emplace_back();
        step = &l.steps.back();
        step->line = line_no;
        seen.clear();
        text_break = false;
        continue;
      }
      const auto colon = line.find(':');
      if (colon == std::string::npos)
        fail(line_no, "expected 'key: value' or [step], got '" + line.substr(0, 40) + "'");
      const std::string key = trim(std::string_view(line).substr(0, colon));
      const std::string value = trim(std::string_view(line).substr(colon + 1));
      const bool header_key =
          key == "title" || key == "prompt" || key == "layout" || key == "compare_model";
      const bool step_key = key == "panel" || key == "text" || key == "action" ||
                            key == "question" || key == "answer";
      if (!header_key && !step_key)
        fail(line_no, "unknown key '" + key +
                          "' (title, prompt, layout, compare_model; in a step: text, panel, "
                          "action, question, "
                          "answer)");
      if (header_key && step) fail(line_no, "'" + key + "' belongs before the first [step]");
      if (step_key && !step) fail(line_no, "'" + key + "' outside a step (start one with [step])");
      if (key != "text") {
        if (std::find(seen.begin(), seen.end(), key) != seen.end())
          fail(line_no, "'" + key + "' given twice");
        seen.push_back(key);
        if (value.empty()) fail(line_no, "'" + key + "' has no value");
      }
      if (key == "title") {
        l.title = value;
      } else if (key == "prompt") {
        l.prompt = value;
      } else if (key == "layout") {
        if (std::find(vocab_.layouts.begin(), vocab_.layouts.end(), value) == vocab_.layouts.end())
          fail(line_no, "unknown layout '" + value + "'");
        l.layout = value;
      } else if (key == "compare_model") {
        l.compare_model = find_model(line_no, value);
      } else if (key == "panel") {
        if (std::find(vocab_.panels.begin(), vocab_.panels.end(), value) == vocab_.panels.end())
          fail(line_no, "unknown panel '" + value + "'");
        step->panel = value;
      } else if (key == "action") {
        step->action = parse_action(line_no, value);
      } else if (key == "question" || key == "answer") {
        if (key == "answer" && step->question.empty())
          fail(line_no, "an answer needs a question before it");
        if (value.size() > kMaxQuestionBytes)
          fail(line_no, "the " + key + " is " + std::to_string(value.size()) + " bytes; at most " +
                            std::to_string(kMaxQuestionBytes) + " are shown (shorten it)");
        (key == "question" ? step->question : step->answer) = value;
      } else if (key == "text") {
        if (value.empty()) {
          text_break = !step->text.empty();
        } else {
          if (!step->text.empty()) step->text += text_break ? "\n\n" : " ";
          step->text += value;
          text_break = false;
        }
      }
    }
    if (!any) fail_file("empty file (a lesson needs a title: line and at least one [step])");
    if (l.title.empty()) fail_file("no 'title:' line before the first [step]");
    if (l.steps.empty()) fail_file("no [step] section");
    for (std::size_t i = 0; i < l.steps.size(); ++i) {
      if (l.steps[i].text.empty())
        fail(l.steps[i].line, "step " + std::to_string(i + 1) + " has no text: line");
      if (l.steps[i].text.size() > kMaxStepTextBytes)
        fail(l.steps[i].line,
             "step " + std::to_string(i + 1) + "'s text is " +
                 std::to_string(l.steps[i].text.size()) + " bytes; the lesson bar shows at most " +
                 std::to_string(kMaxStepTextBytes) + " (split it into several steps)");
    }
    return l;
  }

 private:
  std::string source_;
  const Vocabulary& vocab_;
};

// An action's number as the lesson file writes it (shortest form: 1.5, 40).
std::string num(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

}  // namespace

std::string action_text(const Action& a) {
  switch (a.kind) {
    case ActionKind::kNext:
      return "next";
    case ActionKind::kStep:
      return "step";
    case ActionKind::kPrefill:
      return "prefill";
    case ActionKind::kBack:
      return "back";
    case ActionKind::kGreedy:
      return "greedy";
    case ActionKind::kTemperature:
      return "temperature " + num(a.value);
    case ActionKind::kTopP:
      return "top_p " + num(a.value);
    case ActionKind::kTopK:
      return "top_k " + num(a.value);
    case ActionKind::kKvCache:
      return std::string("kv_cache ") + (a.on ? "on" : "off");
    case ActionKind::kClickToken:
      return "click_token";
    case ActionKind::kCacheCompare:
      return "cache_compare";
    case ActionKind::kCompare:
      return "compare";
    case ActionKind::kBatchSweep:
      return "batch_sweep";
  }
  return "next";
}

std::string action_request(const Action& a) {
  switch (a.kind) {
    case ActionKind::kNext:
      return "read, then Next";
    case ActionKind::kStep:
      return "take a step: Space, Page Down or Step";
    case ActionKind::kPrefill:
      return "run the prefill: Space or Step";
    case ActionKind::kBack:
      return "step back: Left, Page Up or Back";
    case ActionKind::kGreedy:
      return "choose greedy in \"Choosing the next token\"";
    case ActionKind::kTemperature:
      return "choose sample and set the temperature to " + num(a.value);
    case ActionKind::kTopP:
      return "choose sample and set top-p to " + num(a.value);
    case ActionKind::kTopK:
      return "choose sample and set top-k to " + num(a.value);
    case ActionKind::kKvCache:
      return std::string("turn the KV cache ") + (a.on ? "on" : "off") + " in Step control";
    case ActionKind::kClickToken:
      return "click a token in the token strip";
    case ActionKind::kCacheCompare:
      return "press Run both ways in \"KV cache on vs off\"";
    case ActionKind::kCompare:
      return "press Run in the Compare panel and let it finish";
    case ActionKind::kBatchSweep:
      return "run the batch sweep in the Roofline panel and let it finish";
  }
  return "";
}

Lesson parse_lesson(std::string_view text, const std::string& source, const Vocabulary& vocab) {
  return Parser(source, vocab).parse(text);
}

Lesson load_lesson(const std::filesystem::path& path, const Vocabulary& vocab) {
  const std::string name = path.string();
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) throw Error(name + ": no such file");
  // A FIFO or a device would block or never end: only regular files.
  if (!std::filesystem::is_regular_file(status)) throw Error(name + ": not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(name + ": cannot read");
  std::string text(kMaxLessonBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (in.bad()) throw Error(name + ": cannot read");
  return parse_lesson(text, name, vocab);
}

std::vector<std::filesystem::path> list_lessons(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  if (dir.empty() || !std::filesystem::is_directory(dir, ec)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ".lesson" && e.is_regular_file(ec)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace ts::lesson
