// The lesson file parser: good files, and every malformed kind giving one
// line that names the file and the line at fault.
#include "lesson/lesson.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "util/error.h"

namespace ts::lesson {
namespace {

const Vocabulary kVocab{{"prompt", "transport", "attention", "sampling", "kv", "cache"},
                        {"lesson", "memory", "cost"},
                        {}};

const char* kGood = R"(# A comment line
title: Prefill, decode and the KV cache
prompt: Today's weather is so
layout: lesson

[step]
panel: prompt
text: The prompt is tokens.
text: Each chip is one token.
question: Why is "Today's" two tokens?
answer: The tokenizer splits off 's.

[step]
panel: transport
action: step
text: Press Space to run the prefill.
text:
text: A second paragraph.

[step]
action: temperature 0.7
panel: sampling
text: Set the temperature.

[step]
action: kv_cache off
text: Turn the cache off.

[step]
action:   top_k 40
text: Keep 40.
)";

// The message of the ts::Error that parsing `text` throws ("" if none).
std::string error_of(const std::string& text, const std::string& name = "x.lesson") {
  try {
    parse_lesson(text, name, kVocab);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Lesson, AGoodFileGivesEveryStepWithItsActionPanelAndQuestion) {
  const Lesson l = parse_lesson(kGood, "good.lesson", kVocab);
  EXPECT_EQ(l.title, "Prefill, decode and the KV cache");
  EXPECT_EQ(l.prompt, "Today's weather is so");
  EXPECT_EQ(l.layout, "lesson");
  ASSERT_EQ(l.steps.size(), 5u);
  EXPECT_EQ(l.steps[0].line, 6);
  EXPECT_EQ(l.steps[0].panel, "prompt");
  EXPECT_EQ(l.steps[0].text, "The prompt is tokens. Each chip is one token.");
  EXPECT_EQ(l.steps[0].action.kind, ActionKind::kNext);
  EXPECT_EQ(l.steps[0].question, "Why is \"Today's\" two tokens?");
  EXPECT_EQ(l.steps[0].answer, "The tokenizer splits off 's.");
  EXPECT_EQ(l.steps[1].action.kind, ActionKind::kStep);
  EXPECT_EQ(l.steps[1].text, "Press Space to run the prefill.\n\nA second paragraph.");
  EXPECT_EQ(l.steps[2].action.kind, ActionKind::kTemperature);
  EXPECT_DOUBLE_EQ(l.steps[2].action.value, 0.7);
  EXPECT_EQ(l.steps[2].panel, "sampling");
  EXPECT_EQ(l.steps[3].action.kind, ActionKind::kKvCache);
  EXPECT_FALSE(l.steps[3].action.on);
  EXPECT_EQ(l.steps[3].panel, "");
  EXPECT_EQ(l.steps[4].action.kind, ActionKind::kTopK);
  EXPECT_EQ(l.steps[4].action.value, 40);
  EXPECT_EQ(action_text(l.steps[2].action), "temperature 0.7");
  EXPECT_EQ(action_text(l.steps[3].action), "kv_cache off");
}

TEST(Lesson, WindowsLineEndsAndEveryActionNameParse) {
  std::string t = "title: T\r\n";
  for (const char* a :
       {"next", "step", "prefill", "back", "greedy", "temperature 1.5", "top_p 0.9", "top_k 5",
        "kv_cache on", "click_token", "cache_compare", "compare", "batch_sweep"})
    t += std::string("[step]\r\ntext: x\r\naction: ") + a + "\r\n";
  const Lesson l = parse_lesson(t, "crlf.lesson", kVocab);
  ASSERT_EQ(l.steps.size(), 13u);
  EXPECT_EQ(l.steps[10].action.kind, ActionKind::kCacheCompare);
  EXPECT_EQ(l.steps[11].action.kind, ActionKind::kCompare);
  EXPECT_EQ(l.steps[12].action.kind, ActionKind::kBatchSweep);
  EXPECT_EQ(action_text(l.steps[11].action), "compare");
  EXPECT_EQ(action_text(l.steps[12].action), "batch_sweep");
  EXPECT_TRUE(l.steps[8].action.on);
  for (const Step& s : l.steps) EXPECT_EQ(s.text, "x");  // no \r left
}

TEST(Lesson, MalformedFilesNameTheFileAndTheLine) {
  const std::string head = "title: T\n[step]\ntext: x\n";  // the next line is line 4
  struct Case {
    std::string text, expected;
  };
  const Case cases[] = {
      {head + "panel: heatmap\n", "x.lesson:4: unknown panel 'heatmap'"},
      {head + "action: dance\n", "x.lesson:4: unknown action 'dance'"},
      {head + "action: temperature warm\n", "x.lesson:4: temperature: 'warm' is not a number"},
      {head + "action: temperature 0.7x\n", "x.lesson:4: temperature: '0.7x' is not a number"},
      {head + "action: temperature 0\n", "x.lesson:4: temperature: 0 is out of range"},
      {head + "action: temperature nan\n", "x.lesson:4: temperature: 'nan' is not a number"},
      {head + "action: top_p 1.5\n", "x.lesson:4: top_p: 1.5 is out of range"},
      {head + "action: top_k 2.5\n", "x.lesson:4: top_k: '2.5' is not a whole number"},
      {head + "action: temperature\n", "x.lesson:4: action 'temperature' needs a value"},
      {head + "action: step now\n", "x.lesson:4: action 'step' takes no value"},
      {head + "action: kv_cache maybe\n", "x.lesson:4: action 'kv_cache' needs on or off"},
      {head + "action: step\naction: back\n", "x.lesson:5: 'action' given twice"},
      {head + "answer: 42\n", "x.lesson:4: an answer needs a question before it"},
      {head + "colour: red\n", "x.lesson:4: unknown key 'colour'"},
      {head + "just words\n", "x.lesson:4: expected 'key: value' or [step]"},
      {head + "[quiz]\n", "x.lesson:4: unknown section '[quiz]'"},
      {head + "title: again\n", "x.lesson:4: 'title' belongs before the first [step]"},
      {head + "panel:\n", "x.lesson:4: 'panel' has no value"},
      {"title: T\nlayout: nowhere\n[step]\ntext: x\n", "x.lesson:2: unknown layout 'nowhere'"},
      {"title: T\ntext: x\n", "x.lesson:2: 'text' outside a step"},
      {"title: T\n[step]\ntext: x\n\n[step]\npanel: kv\n", "x.lesson:5: step 2 has no text"},
      {"[step]\ntext: x\n", "x.lesson: no 'title:' line"},
      {"title: T\n", "x.lesson: no [step] section"},
      {"", "x.lesson: empty file"},
      {"\n  \n# only a comment\n", "x.lesson: empty file"},
  };
  for (const Case& c : cases) {
    const std::string e = error_of(c.text);
    EXPECT_EQ(e.rfind(c.expected, 0), 0u) << "got: " << e << "\nexpected: " << c.expected;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

TEST(Lesson, BinaryAndNonUtf8TextIsRefusedWithItsLine) {
  EXPECT_EQ(error_of("title: T\n[step]\ntext: caf\xE9\n").rfind("x.lesson:3: not valid UTF-8", 0),
            0u);
  EXPECT_EQ(error_of("title: T\n\xC0\xAF\n").rfind("x.lesson:2: not valid UTF-8", 0),
            0u);                                                                        // overlong
  EXPECT_EQ(error_of("title: T\xE2\x82").rfind("x.lesson:1: not valid UTF-8", 0), 0u);  // cut off
  EXPECT_EQ(error_of("title: T\xED\xA0\x80\n").rfind("x.lesson:1: not valid UTF-8", 0), 0u);
  EXPECT_EQ(error_of(std::string("title: T\n[step]\ntext: a\0b\n", 24)).rfind("x.lesson:3: ", 0),
            0u);
  // Valid UTF-8 beyond ASCII is text like any other.
  const Lesson l = parse_lesson("title: Cafés ☕ 😀\n[step]\ntext: ␣so\n", "u.lesson", kVocab);
  EXPECT_EQ(l.title, "Cafés ☕ 😀");
}

// Some editors (Notepad) start a UTF-8 file with a byte order mark: it is
// skipped, not read as part of the first key.
TEST(Lesson, AByteOrderMarkIsSkipped) {
  const Lesson l =
      parse_lesson("\xEF\xBB\xBFtitle: With a BOM\r\n[step]\r\ntext: a\r\n", "bom.lesson", kVocab);
  EXPECT_EQ(l.title, "With a BOM");
  ASSERT_EQ(l.steps.size(), 1u);
  EXPECT_EQ(l.steps[0].line, 2);
  // Only at the start: elsewhere it is refused like any stray text.
  EXPECT_EQ(error_of("title: T\n\xEF\xBB\xBF[step]\ntext: a\n").rfind("x.lesson:2: ", 0), 0u);
}

TEST(Lesson, AtMost200Steps) {
  std::string text = "title: T\n";
  for (int i = 0; i < 200; ++i) text += "[step]\ntext: a\n";
  EXPECT_EQ(parse_lesson(text, "x.lesson", kVocab).steps.size(), 200u);
  const std::string e = error_of(text + "[step]\ntext: a\n");
  EXPECT_EQ(e, "x.lesson:402: more than 200 steps") << e;
}

TEST(Lesson, AHugeFileIsRefusedBeforeItIsParsed) {
  std::string big = "title: T\n[step]\ntext: x\n";
  while (big.size() <= kMaxLessonBytes) big += "text: " + std::string(70, 'a') + "\n";
  const std::string e = error_of(big);
  EXPECT_EQ(e.rfind("x.lesson: larger than 65536 bytes", 0), 0u) << e;
}

// The bar shows a few lines: a step longer than it can show is refused at
// its [step] line, as are a question or an answer longer than a paragraph.
TEST(Lesson, AStepTooLongToShowIsRefusedWithItsLine) {
  std::string text = "title: T\n[step]\ntext: a\n[step]\n";
  for (int i = 0; i < 400; ++i) text += "text: " + std::string(57, 'w') + "\n";
  std::string e = error_of(text);
  EXPECT_EQ(e.rfind("x.lesson:4: step 2's text is 23199 bytes; the lesson bar shows at most 4096 "
                    "(split it into several steps)",
                    0),
            0u)
      << e;
  const std::string head = "title: T\n[step]\ntext: x\n";
  e = error_of(head + "question: " + std::string(1001, 'q') + "\n");
  EXPECT_EQ(e.rfind("x.lesson:4: the question is 1001 bytes; at most 1000", 0), 0u) << e;
  e = error_of(head + "question: q?\nanswer: " + std::string(1001, 'a') + "\n");
  EXPECT_EQ(e.rfind("x.lesson:5: the answer is 1001 bytes; at most 1000", 0), 0u) << e;
  // At the limits: accepted.
  const Lesson l = parse_lesson("title: T\n[step]\ntext: " + std::string(kMaxStepTextBytes, 'w') +
                                    "\nquestion: " + std::string(kMaxQuestionBytes, 'q') +
                                    "\nanswer: " + std::string(kMaxQuestionBytes, 'a') + "\n",
                                "x.lesson", kVocab);
  EXPECT_EQ(l.steps[0].text.size(), kMaxStepTextBytes);
}

std::filesystem::path temp_dir() {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("tokenscope-lesson-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(Lesson, FilesAreReadListedAndSpecialFilesRefused) {
  const auto dir = temp_dir();
  std::ofstream(dir / "b.lesson") << kGood;
  std::ofstream(dir / "a.lesson") << "title: A\n[step]\ntext: a\n";
  std::ofstream(dir / "notes.txt") << "not a lesson";
  std::filesystem::create_directory(dir / "c.lesson");  // a folder, not a file
  const auto list = list_lessons(dir);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].filename(), "a.lesson");
  EXPECT_EQ(list[1].filename(), "b.lesson");
  EXPECT_EQ(load_lesson(list[1], kVocab).steps.size(), 5u);
  EXPECT_TRUE(list_lessons(dir / "missing").empty());
  auto load_error = [&](const std::filesystem::path& p) -> std::string {
    try {
      load_lesson(p, kVocab);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(load_error(dir / "missing.lesson"),
            (dir / "missing.lesson").string() + ": no such file");
  EXPECT_EQ(load_error(dir / "c.lesson"), (dir / "c.lesson").string() + ": not a regular file");
  const auto fifo = dir / "fifo.lesson";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(load_error(fifo), fifo.string() + ": not a regular file");  // and no hang
  std::ofstream(dir / "bad.lesson") << "title: T\n[step]\ntext: x\naction: fly\n";
  EXPECT_EQ(load_error(dir / "bad.lesson")
                .rfind((dir / "bad.lesson").string() + ":4: unknown action 'fly'", 0),
            0u);
  std::filesystem::remove_all(dir);
}

TEST(Lesson, CompareModelIsFoundByNameInTheModelsFoldersOrBesideTheLesson) {
  const auto dir = temp_dir();
  namespace fs = std::filesystem;
  fs::create_directories(dir / "models-a");
  fs::create_directories(dir / "models-b" / "twin");
  fs::create_directories(dir / "lessons" / "mine");
  fs::create_directories(dir / "lessons" / "nearby");
  Vocabulary v = kVocab;
  v.model_dirs = {dir / "models-a", dir / "models-b"};
  const std::string source = (dir / "lessons" / "l.lesson").string();
  auto model_of = [&](const std::string& value) {
    return parse_lesson("title: T\ncompare_model: " + value + "\n[step]\ntext: x\n", source, v)
        .compare_model;
  };
  // A bare name: the first models folder that has it.
  EXPECT_EQ(model_of("twin"), dir / "models-b" / "twin");
  fs::create_directories(dir / "models-a" / "twin");
  EXPECT_EQ(model_of("twin"), dir / "models-a" / "twin");
  // Not in a models folder: beside the lesson.
  EXPECT_EQ(model_of("nearby"), dir / "lessons" / "nearby");
  // A path: relative to the lesson's folder, or absolute.
  EXPECT_EQ(model_of("./mine"), dir / "lessons" / "mine");
  EXPECT_EQ(model_of("../models-b/twin"), dir / "models-b" / "twin");
  EXPECT_EQ(model_of((dir / "models-b" / "twin").string()), dir / "models-b" / "twin");
  // Without the key: none.
  EXPECT_TRUE(parse_lesson("title: T\n[step]\ntext: x\n", source, v).compare_model.empty());

  // A missing model: one line naming the file, the line and where it looked.
  auto error = [&](const std::string& text) -> std::string {
    try {
      parse_lesson(text, source, v);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  std::string e = error("title: T\n\ncompare_model: ghost\n[step]\ntext: x\n");
  EXPECT_EQ(e, source + ":3: compare_model: no model 'ghost' (looked for " +
                   (dir / "models-a" / "ghost").string() + ", " +
                   (dir / "models-b" / "ghost").string() + ", " +
                   (dir / "lessons" / "ghost").string() + ")");
  e = error("title: T\ncompare_model: sub/ghost\n[step]\ntext: x\n");
  EXPECT_EQ(e, source + ":2: compare_model: no model 'sub/ghost' (looked for " +
                   (dir / "lessons" / "sub" / "ghost").string() + ")");
  e = error("title: T\n[step]\ntext: x\ncompare_model: twin\n");
  EXPECT_EQ(e.rfind(source + ":4: 'compare_model' belongs before the first [step]", 0), 0u) << e;
  e = error("title: T\ncompare_model: twin\ncompare_model: twin\n[step]\ntext: x\n");
  EXPECT_EQ(e.rfind(source + ":3: 'compare_model' given twice", 0), 0u) << e;
  e = error("title: T\ncompare_model:\n[step]\ntext: x\n");
  EXPECT_EQ(e.rfind(source + ":2: 'compare_model' has no value", 0), 0u) << e;
  fs::remove_all(dir);
}

TEST(Lesson, TheBundledLessonsParseWithTheWindowsNames) {
  // The panel keys and layout names the window accepts (its panel_list.h and
  // layout.cpp); a bundled lesson using another name would fail here.
  // A bare compare_model name is looked for in the bundled models' folder.
  const auto assets = std::filesystem::path(TS_SOURCE_DIR) / "assets";
  const Vocabulary window{
      {"prompt", "transport", "attention", "kv", "logits", "sampling", "timeline", "roofline",
       "lens", "cache", "rope", "lanes", "lookahead", "precision", "help"},
      {"classroom", "lesson",    "memory",    "cost",  "layers",    "compare",   "formats",
       "prompt",    "transport", "attention", "kv",    "logits",    "sampling",  "timeline",
       "roofline",  "lens",      "cache",     "lanes", "lookahead", "precision", "help"},
      {assets / "models"}};
  const auto list = list_lessons(assets / "lessons");
  ASSERT_GE(list.size(), 7u);
  EXPECT_EQ(list[4].filename(), "5-no-draft-model-needed.lesson");
  EXPECT_EQ(list[5].filename(), "6-why-fewer-bytes-are-faster.lesson");
  EXPECT_EQ(list[6].filename(), "7-what-changed-since-gpt-2.lesson");
  // Lesson 7 compares the session's GPT-2 with its Llama-shaped twin.
  EXPECT_EQ(load_lesson(list[6], window).compare_model,
            assets / "models" / "tokenscope-tiny-llama");
  for (const auto& p : list) {
    SCOPED_TRACE(p.string());
    const Lesson l = load_lesson(p, window);
    EXPECT_FALSE(l.title.empty());
    EXPECT_GE(l.steps.size(), 4u);
    bool waits = false;
    for (const Step& s : l.steps) waits = waits || s.action.kind != ActionKind::kNext;
    EXPECT_TRUE(waits) << "a lesson asks the class to do something";
  }
}

}  // namespace
}  // namespace ts::lesson
