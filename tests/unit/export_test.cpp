// The exports for slides, from a real session on the tiny fixture model:
// the SVG is read back with a real XML parser (expat) and every attention
// cell's fill is checked against the colour map of the recorded weight;
// the CSV values against the step's logits and an independent softmax;
// hostile token text (quotes, <, &, control bytes, partial UTF-8) escaped;
// the file written atomically, with one-line errors.
#include <expat.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "app/export_csv.h"
#include "app/export_svg.h"
#include "app/exports.h"
#include "model/token_display.h"
#include "session/session.h"
#include "session/session_worker.h"
#include "test_models.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/svg_writer.h"

namespace ts::app {
namespace {

// ---- a small DOM from expat ----

struct Element {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::string text;  // character data directly inside
  std::vector<std::unique_ptr<Element>> children;
  Element* parent = nullptr;

  std::string attr(const std::string& k) const {
    const auto it = attrs.find(k);
    return it == attrs.end() ? std::string() : it->second;
  }
  // Every descendant (and this) named `n`, document order.
  void collect(const std::string& n, std::vector<const Element*>& out) const {
    if (name == n) out.push_back(this);
    for (const auto& c : children) c->collect(n, out);
  }
  std::vector<const Element*> all(const std::string& n) const {
    std::vector<const Element*> out;
    collect(n, out);
    return out;
  }
  const Element* by_id(const std::string& id) const {
    if (attr("id") == id) return this;
    for (const auto& c : children)
      if (const Element* e = c->by_id(id)) return e;
    return nullptr;
  }
};

struct ParseResult {
  std::unique_ptr<Element> root;
  std::string error;  // empty: well-formed
};

ParseResult parse_xml(const std::string& doc) {
  struct State {
    std::unique_ptr<Element> root;
    Element* cur = nullptr;
  } st;
  XML_Parser p = XML_ParserCreate("UTF-8");
  XML_SetUserData(p, &st);
  XML_SetElementHandler(
      p,
      [](void* ud, const XML_Char* name, const XML_Char** atts) {
        auto& s = *static_cast<State*>(ud);
        auto e = std::make_unique<Element>();
        e->name = name;
        for (int i = 0; atts[i]; i += 2) e->attrs[atts[i]] = atts[i + 1];
        Element* raw = e.get();
        if (!s.cur) {
          s.root = std::move(e);
        } else {
          raw->parent = s.cur;
          s.cur->children.push_back(std::move(e));
        }
        s.cur = raw;
      },
      [](void* ud, const XML_Char*) {
        auto& s = *static_cast<State*>(ud);
        s.cur = s.cur->parent;
      });
  XML_SetCharacterDataHandler(p, [](void* ud, const XML_Char* text, int len) {
    auto& s = *static_cast<State*>(ud);
    if (s.cur) s.cur->text.append(text, len);
  });
  ParseResult r;
  if (XML_Parse(p, doc.data(), static_cast<int>(doc.size()), 1) == XML_STATUS_ERROR)
    r.error = std::string(XML_ErrorString(XML_GetErrorCode(p))) + " at line " +
              std::to_string(XML_GetCurrentLineNumber(p));
  XML_ParserFree(p);
  r.root = std::move(st.root);
  return r;
}

// ---- a small RFC 4180 reader ----

std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1);
  std::string field;
  bool quoted = false, was_quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"' && field.empty() && !was_quoted) {
      quoted = was_quoted = true;
    } else if (c == ',') {
      rows.back().push_back(field);
      field.clear();
      was_quoted = false;
    } else if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
      rows.back().push_back(field);
      field.clear();
      was_quoted = false;
      rows.emplace_back();
      ++i;
    } else {
      field += c;
    }
  }
  if (rows.back().empty() && field.empty()) rows.pop_back();
  return rows;
}

// ---- the session ----

struct Fixture {
  LoadedModel model = test::load_tiny();
  std::unique_ptr<Session> session;
  Fixture() {
    session = std::make_unique<Session>(model.tokenizer, model.engine, SessionOptions{});
    session->set_prompt("The cat sat on the mat, and");
    session->prefill();
    session->step();
  }
  std::string piece(int id) const { return display_piece(model.tokenizer->token_bytes(id)); }
};

// The prefill's full causal matrix of one layer and head, read straight
// from the trace's [head][rows][context] layout (not through the app).
AttentionMatrix prefill_matrix(const Session& s, int layer, int head) {
  const StepTrace& pre = *s.history().front();
  const LaneStep& ls = pre.lanes[0];
  const int t = ls.rows();
  const std::vector<float>& a = *ls.attention[layer];
  AttentionMatrix m;
  m.n = t;
  m.prompt_len = t;
  m.complete = true;
  m.tokens = ls.input_tokens;
  m.values.assign(static_cast<size_t>(t) * t, kMaskedValue);
  for (int q = 0; q < t; ++q)
    for (int k = 0; k <= q; ++k)
      m.values[static_cast<size_t>(q) * t + k] = a[(static_cast<size_t>(head) * t + q) * t + k];
  return m;
}

// Hostile token text: every character XML treats specially, control bytes,
// a cut UTF-8 character, a stray continuation byte, an overlong form, a
// surrogate; and what each reads back as.
const std::string kHostile =
    "\"<a href='x'>&amp;\x01\x1F\t\xE2\x82 \x80\xC0\xAF\xED\xA0\x80 \xE2\x82\xAC";
const std::string kReplacement = "\xEF\xBF\xBD";
std::string hostile_read_back() {
  std::string r = "\"<a href='x'>&amp;";
  r += kReplacement + kReplacement;  // \x01 \x1F
  r += "\t";
  r += kReplacement + kReplacement + " ";                 // the cut euro sign, two bytes
  r += kReplacement;                                      // \x80
  r += kReplacement + kReplacement;                       // overlong /
  r += kReplacement + kReplacement + kReplacement + " ";  // surrogate
  r += "\xE2\x82\xAC";                                    // a whole euro sign stays
  return r;
}

// Short enough to be a row label uncut: quote, <, &, apostrophe, a control
// byte and the first two bytes of a three-byte character.
const std::string kShortHostile = "\"<&'\x01\xE2\x82";

TEST(SvgWriter, EscapesHostileTextInContentAndAttributes) {
  const std::string doc = "<r a=\"" + xml_escape(kHostile) + "\">" + xml_escape(kHostile) + "</r>";
  const ParseResult p = parse_xml(doc);
  ASSERT_TRUE(p.error.empty()) << p.error << "\n" << doc;
  EXPECT_EQ(p.root->text, hostile_read_back());
  EXPECT_EQ(p.root->attr("a"), hostile_read_back());
  // Well-formed text passes through untouched, multi-byte characters included.
  const std::string fine = "caf\xC3\xA9 \xE2\x86\xB5 \xF0\x9F\x98\x80 \xE2\x90\xA3";
  EXPECT_EQ(xml_escape(fine), fine);
  EXPECT_EQ(xml_escape("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&apos;");
}

TEST(SvgWriter, DocumentParsesAndKeepsTextAsText) {
  SvgWriter svg(200, 100);
  svg.title(kHostile);
  svg.begin_group("id=\"g\"");
  svg.rect(1, 2, 3, 4, "#ff0000", "none", 0, kHostile);
  SvgWriter::TextStyle st;
  svg.text(10, 20, kHostile, st);
  svg.text(10, 40, " leading and trailing ", st);
  const std::string doc = svg.finish();  // closes the group
  const ParseResult p = parse_xml(doc);
  ASSERT_TRUE(p.error.empty()) << p.error;
  EXPECT_EQ(p.root->name, "svg");
  const auto texts = p.root->all("text");
  ASSERT_EQ(texts.size(), 2u);
  EXPECT_EQ(texts[0]->text, hostile_read_back());
  EXPECT_EQ(texts[1]->text, " leading and trailing ");
  EXPECT_EQ(p.root->all("rect").size(), 2u);  // the background and ours
}

TEST(ExportSvg, AttentionCellsAreTheColourMapOfTheRecordedWeights) {
  Fixture f;
  for (const auto& [layer, head, map, scale] :
       std::vector<std::tuple<int, int, Colormap, HeatScale>>{
           {0, 0, Colormap::kViridis, HeatScale::kLinear},
           {1, 3, Colormap::kMagma, HeatScale::kLog},
           {1, 1, Colormap::kGray, HeatScale::kLinear}}) {
    const AttentionMatrix m = prefill_matrix(*f.session, layer, head);
    ASSERT_GT(m.n, 4);
    AttentionSvgInput in;
    in.matrix = &m;
    for (int t : m.tokens) in.labels.push_back(f.piece(t));
    in.labels[2] = kShortHostile;  // any bytes a token can hold
    in.title = "Attention & <friends>";
    in.colormap = map;
    in.range.scale = scale;
    const std::string doc = attention_svg(in);
    const ParseResult p = parse_xml(doc);
    ASSERT_TRUE(p.error.empty()) << p.error;
    const Element* cells = p.root->by_id("cells");
    ASSERT_NE(cells, nullptr);
    const auto rects = cells->all("rect");
    ASSERT_EQ(rects.size(), static_cast<size_t>(m.n) * m.n);
    int masked = 0;
    for (int q = 0; q < m.n; ++q)
      for (int k = 0; k < m.n; ++k) {
        const Element& r = *rects[static_cast<size_t>(q) * m.n + k];
        const float v = m.at(q, k);
        if (k > q) {
          EXPECT_EQ(r.attr("fill"), "url(#masked)");
          ++masked;
          continue;
        }
        ASSERT_GE(v, 0.0f);
        const Rgb8 c = colorize(v, map, in.range);
        EXPECT_EQ(r.attr("fill"), svg_color(c.r, c.g, c.b)) << "cell " << q << "," << k;
      }
    EXPECT_EQ(masked, m.n * (m.n - 1) / 2);
    // The labels are text, the hostile one escaped and read back.
    int found = 0, hostile = 0;
    for (const Element* t : p.root->all("text")) {
      if (t->text == f.piece(m.tokens[1])) ++found;
      if (t->text == "\"<&'" + kReplacement + kReplacement + kReplacement) ++hostile;
    }
    EXPECT_GE(found, 2) << "row and column label";
    EXPECT_EQ(hostile, 2);
    EXPECT_EQ(p.root->all("title").front()->text, "Attention & <friends>");
    // A legend: the gradient from the same colour map.
    const auto stops = p.root->all("stop");
    ASSERT_EQ(stops.size(), 33u);
    const Rgb8 top = colormap_at(map, 1.0f);
    EXPECT_EQ(stops.back()->attr("stop-color"), svg_color(top.r, top.g, top.b));
  }
}

TEST(ExportCsv, LogitsAreTheStepsRecordAndItsSoftmax) {
  Fixture f;
  const StepTrace& trace = *f.session->history().back();
  const LaneStep& rec = trace.lanes[0];
  const std::string csv = logits_csv(trace, 1, [&](int id) { return f.piece(id); });
  const auto rows = parse_csv(csv);
  ASSERT_EQ(rows.size(), rec.logits.size() + 1);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"step", "lane", "token", "id", "logit",
                                               "probability", "rank"}));
  // An independent softmax in double.
  double mx = -INFINITY;
  for (float l : rec.logits) mx = std::max(mx, static_cast<double>(l));
  double z = 0;
  for (float l : rec.logits) z += std::exp(l - mx);
  std::vector<bool> seen(rec.logits.size(), false);
  double prev = 2.0;
  for (size_t i = 1; i < rows.size(); ++i) {
    const auto& r = rows[i];
    ASSERT_EQ(r.size(), 7u) << "row " << i;
    EXPECT_EQ(r[0], "1");
    EXPECT_EQ(r[1], "0");
    const int id = std::stoi(r[3]);
    ASSERT_GE(id, 0);
    ASSERT_LT(id, static_cast<int>(rec.logits.size()));
    EXPECT_FALSE(seen[id]);
    seen[id] = true;
    EXPECT_EQ(r[2], f.piece(id));
    EXPECT_NEAR(std::stod(r[4]), rec.logits[id], 1e-6);
    const double p = std::exp(rec.logits[id] - mx) / z;
    EXPECT_NEAR(std::stod(r[5]), p, 1e-6);
    EXPECT_EQ(std::stoi(r[6]), static_cast<int>(i));
    EXPECT_LE(std::stod(r[5]), prev);  // ranked, most likely first
    prev = std::stod(r[5]);
  }
  // Greedy: the chosen token is the first row.
  EXPECT_EQ(std::stoi(rows[1][3]), rec.chosen_token);
}

TEST(ExportCsv, LogitsHoldEveryLanesOwnRecord) {
  LoadedModel model = test::load_tiny();
  Session s(model.tokenizer, model.engine, SessionOptions{});
  s.set_prompt("Once upon a time");
  s.set_strategies({SamplingParams{}, test::sampled(1.5f, 7)});
  s.prefill();
  s.step();
  s.step();
  const StepTrace& trace = *s.history().back();
  ASSERT_EQ(trace.lanes.size(), 2u);
  // Different contexts by now, so rows put under the wrong lane would show.
  ASSERT_NE(trace.lanes[0].logits, trace.lanes[1].logits);
  const auto rows = parse_csv(logits_csv(
      trace, 2, [&](int id) { return display_piece(model.tokenizer->token_bytes(id)); }));
  const size_t vocab = trace.lanes[0].logits.size();
  ASSERT_EQ(rows.size(), 2 * vocab + 1);
  for (size_t i = 1; i < rows.size(); ++i) {
    const int lane = std::stoi(rows[i][1]);
    const LaneStep* rec = nullptr;
    for (const LaneStep& ls : trace.lanes)
      if (ls.lane == lane) rec = &ls;
    ASSERT_NE(rec, nullptr) << "row " << i;
    EXPECT_EQ(lane, i <= vocab ? trace.lanes[0].lane : trace.lanes[1].lane);
    EXPECT_NEAR(std::stod(rows[i][4]), rec->logits[std::stoi(rows[i][3])], 1e-6);
  }
}

TEST(ExportCsv, AttentionGridHoldsEveryWeightAndQuotesLabels) {
  Fixture f;
  const AttentionMatrix m = prefill_matrix(*f.session, 1, 2);
  std::vector<std::string> labels;
  for (int t : m.tokens) labels.push_back(f.piece(t));
  labels[1] = "a,\"b\"\r\nc";
  const auto rows = parse_csv(attention_csv(m, labels));
  ASSERT_EQ(rows.size(), static_cast<size_t>(m.n) + 1);
  ASSERT_EQ(rows[0].size(), static_cast<size_t>(m.n) + 1);
  EXPECT_EQ(rows[0][2], "1:a,\"b\"\r\nc");
  EXPECT_EQ(rows[2][0], "1:a,\"b\"\r\nc");
  for (int q = 0; q < m.n; ++q) {
    ASSERT_EQ(rows[q + 1].size(), static_cast<size_t>(m.n) + 1);
    EXPECT_EQ(rows[q + 1][0].substr(0, rows[q + 1][0].find(':')), std::to_string(q));
    for (int k = 0; k < m.n; ++k) {
      const std::string& cell = rows[q + 1][k + 1];
      if (k > q) {
        EXPECT_TRUE(cell.empty());
      } else {
        EXPECT_NEAR(std::stod(cell), m.at(q, k), 1e-6);
      }
    }
  }
}

TEST(ExportSvg, LogitsBarsAreTheProbabilities) {
  Fixture f;
  const LaneStep& rec = f.session->history().back()->lanes[0];
  const std::string doc = logits_svg(
      rec, [&](int id) { return f.piece(id); }, LogitView::kProbability, 10, "Logits", "step 1");
  const ParseResult p = parse_xml(doc);
  ASSERT_TRUE(p.error.empty()) << p.error;
  const Element* bars = p.root->by_id("bars");
  ASSERT_NE(bars, nullptr);
  // Two rectangles a row (the track, then the bar whose title names the token).
  const auto rects = bars->all("rect");
  ASSERT_EQ(rects.size(), 20u);
  std::vector<double> widths;
  for (size_t i = 1; i < rects.size(); i += 2) widths.push_back(std::stod(rects[i]->attr("width")));
  const double track = std::stod(rects[0]->attr("width"));
  double mx = -INFINITY;
  for (float l : rec.logits) mx = std::max(mx, static_cast<double>(l));
  double z = 0;
  for (float l : rec.logits) z += std::exp(l - mx);
  std::vector<double> probs;
  for (float l : rec.logits) probs.push_back(std::exp(l - mx) / z);
  std::vector<double> sorted = probs;
  std::sort(sorted.rbegin(), sorted.rend());
  for (size_t i = 0; i < widths.size(); ++i)
    EXPECT_NEAR(widths[i] / track, sorted[i] / sorted[0], 0.01 / track) << "bar " << i;
}

TEST(ExportSvg, SamplingStagesAndKvBlocksFromAWorkerSnapshot) {
  LoadedModel model = test::load_tiny();
  SessionOptions so;
  SessionWorker worker(std::make_unique<Session>(model.tokenizer, model.engine, so), "tiny");
  worker.set_prompt("Once upon a time there");
  worker.prefill();
  worker.wait_idle();
  SnapshotPtr snap = worker.snapshot();
  ASSERT_EQ(snap->history.size(), 1u);
  const StepView v = make_step_view(*snap, -1, 0);
  const int prompt = static_cast<int>(snap->prompt_tokens.size());
  // KV blocks: every slot the prefill wrote is drawn in the "written" colour.
  const std::string kv = kv_blocks_svg(*snap, v, "KV");
  const ParseResult pk = parse_xml(kv);
  ASSERT_TRUE(pk.error.empty()) << pk.error;
  const Element* blocks = pk.root->by_id("blocks");
  ASSERT_NE(blocks, nullptr);
  int written = 0, slots = 0;
  for (const Element* r : blocks->all("rect")) {
    if (r->attr("fill") == "none") continue;  // a block's outline
    ++slots;
    if (r->attr("fill") == "#d55e00") ++written;  // the light palette's accent
  }
  EXPECT_EQ(written, prompt);
  EXPECT_EQ(slots % snap->kv.block_size, 0);
  // Sampling stages: greedy shows raw, the banned-words / repetition stages
  // it runs, and final; one row per candidate.
  const std::string st = sampling_svg(
      *v.record, false, [&](int id) { return token_piece(*snap, id); }, "S", "");
  const ParseResult ps = parse_xml(st);
  ASSERT_TRUE(ps.error.empty()) << ps.error;
  EXPECT_NE(ps.root->by_id("stages"), nullptr);
  const SamplingRecord r = sample_next(v.record->logits, v.record->context_ids, v.record->params,
                                       v.record->step_index, v.record->banned_words.get());
  const std::vector<int> cands = stage_candidates(r, v.record->chosen_token, false);
  int token_rows = 0;
  for (const Element* t : ps.root->all("text"))
    for (int id : cands)
      if (t->text == token_piece(*snap, id)) ++token_rows;
  EXPECT_GE(token_rows, static_cast<int>(cands.size()));
}

TEST(ExportFile, WrittenAtomicallyWithOneLineErrors) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("ts-export-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / "a.svg";
  write_file_atomically(file, "first");
  auto read = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  EXPECT_EQ(read(file), "first");
  write_file_atomically(file, "second");
  EXPECT_EQ(read(file), "second");
  auto message = [](const fs::path& p) {
    try {
      write_file_atomically(p, "x");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(""), "no file name given");
  EXPECT_EQ(message(dir), dir.string() + ": is a directory");
  const std::string missing = message(dir / "no" / "such" / "b.svg");
  EXPECT_NE(missing.find("cannot open for writing"), std::string::npos) << missing;
  EXPECT_EQ(missing.find('\n'), std::string::npos);
  // Nothing but the one file is left (no temporary files).
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1);
  EXPECT_EQ(read(file), "second");
  // No session: one line, nothing written.
  ExportSources none;
  try {
    write_export(ExportKind::kAttentionSvg, none, dir / "c.svg");
    ADD_FAILURE() << "exported without a session";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "no model loaded: nothing to export");
  }
  EXPECT_FALSE(fs::exists(dir / "c.svg"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ts::app
