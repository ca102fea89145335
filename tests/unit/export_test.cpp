// The exports for slides, from a real session on the tiny fixture model:
// the SVG is read back with a real XML parser (expat) and every attention
// cell's fill is checked against the colour map of the recorded weight;
// the CSV values against the step's logits and an independent softmax;
// hostile token text (quotes, <, &, control bytes, partial UTF-8) escaped;
// the file written atomically, with one-line errors; every fill and stroke
// of every SVG export a colour a viewer reads; byte sizes in the CLI's units.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "app/exports/export_csv.h"
#include "app/exports/export_svg.h"
#include "app/exports/exports.h"
#include "model/token_display.h"
#include "session/session.h"
#include "session/session_worker.h"
#include "svg_check.h"
#include "test_models.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/svg_writer.h"

namespace ts::app {
namespace {

using test::Element;
using test::parse_xml;
using test::ParseResult;

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

// Every colour of every SVG export, at a step that draws each highlighted
// case: generated tokens among the attention labels, the chosen logit, a
// sampled lane's stages that remove tokens, blocks two lanes share. The
// highlight colours are chosen by a condition at each of these places; a
// style that kept a view of the chosen string after it was gone wrote
// garbage such as fill="8,192 k" there.
TEST(ExportSvg, EveryFillAndStrokeIsAColour) {
  LoadedModel model = test::load_tiny();
  SessionWorker worker(std::make_unique<Session>(model.tokenizer, model.engine, SessionOptions{}),
                       "tiny");
  SamplingParams top_k = test::sampled(1.3f, 7);
  top_k.top_k = 5;
  SamplingParams top_p = test::sampled(0.9f, 11);
  top_p.top_p = 0.6f;
  worker.set_strategies({SamplingParams{}, top_k, top_p});
  worker.set_prompt("Once upon a time there was a cat");
  worker.prefill();
  worker.step();
  worker.step();
  worker.wait_idle();
  SnapshotPtr snap = worker.snapshot();
  ASSERT_EQ(snap->history.size(), 3u);
  auto piece = [&](int id) { return token_piece(*snap, id); };
  auto check = [](const std::string& what, const std::string& doc) {
    const std::vector<std::string> bad = test::bad_paints(doc);
    EXPECT_TRUE(bad.empty()) << what << ": " << bad.size() << " attributes are not colours:\n"
                             << test::paint_report(bad);
  };
  int removing_stages = 0;
  for (int lane = 0; lane < 3; ++lane) {
    const StepView v = make_step_view(*snap, -1, snap->lanes[lane].id);
    ASSERT_NE(v.record, nullptr);
    const std::string at = " (lane " + std::to_string(lane) + ")";
    check("sampling stages" + at, sampling_svg(*v.record, false, piece, "S", "step"));
    check("KV blocks" + at, kv_blocks_svg(*snap, v, "KV"));
    for (LogitView lv : {LogitView::kProbability, LogitView::kLogit, LogitView::kLogProb})
      check("logits" + at, logits_svg(*v.record, piece, lv, 12, "L", "step"));
    // A top_n that leaves the chosen token off the bars: its own line.
    check("logits, top 1" + at, logits_svg(*v.record, piece, LogitView::kProbability, 1, "L", ""));
    const SamplingRecord r = sample_next(v.record->logits, v.record->context_ids, v.record->params,
                                         v.record->step_index, v.record->banned_words.get());
    for (const StageRecord& st : r.stages) removing_stages += st.removed_here > 0;
  }
  EXPECT_GE(removing_stages, 2) << "no stage removed a token: the highlighted case is not drawn";
  EXPECT_GT(snap->kv.blocks_shared, 0) << "no shared block: the highlighted case is not drawn";
  // Attention with generated tokens among the labels (coloured as such), in
  // every colour map and both scales, with and without token labels.
  Fixture f;
  for (int layer = 0; layer < 2; ++layer) {
    AttentionMatrix m = prefill_matrix(*f.session, layer, 1);
    m.prompt_len = m.n - 3;  // the last three as generated tokens
    m.first_new_row = m.n - 1;
    AttentionSvgInput in;
    in.matrix = &m;
    for (int t : m.tokens) in.labels.push_back(f.piece(t));
    in.title = "A";
    in.subtitle = "s";
    in.colormap = layer == 0 ? Colormap::kViridis : Colormap::kMagma;
    in.range.scale = layer == 0 ? HeatScale::kLinear : HeatScale::kLog;
    check("attention", attention_svg(in));
  }
  // Too many positions for a label on each row: the numbered axis.
  AttentionMatrix big;
  big.n = 120;
  big.prompt_len = 100;
  big.first_new_row = 119;
  big.complete = true;
  big.values.assign(static_cast<size_t>(big.n) * big.n, 0.5f);
  AttentionSvgInput in;
  in.matrix = &big;
  check("attention, 120 positions", attention_svg(in));
}

// The check itself: what it accepts and what it refuses.
TEST(ExportSvg, PaintCheckRefusesWhatIsNotAColour) {
  const std::set<std::string> ids = {"masked"};
  for (const char* ok : {"none", "#fff", "#d55e00", "#D55E00", "rgb(1, 2, 255)", "rgb(10%,0%,5%)",
                         "rgb( 0 ,0, 0 )", "url(#masked)", "white", "currentColor"})
    EXPECT_TRUE(test::valid_paint(ok, ids)) << ok;
  for (const char* bad :
       {"", "8,192 k", "#d55e0", "#d55e00 ", "d55e00", "url(#other)", "\xEF\xBF\xBD\xEF\xBF\xBD",
        "rgb(1,2)", "rgb(1,2,3,4)", "rgb(256,0,0)", "rgb(1,,2)", "nonee", "#gggggg", "url(#)"})
    EXPECT_FALSE(test::valid_paint(bad, ids)) << bad;
  EXPECT_EQ(test::bad_paints("<svg><rect fill=\"8,192 k\" stroke=\"none\"/></svg>"),
            (std::vector<std::string>{"<rect> fill=\"8,192 k\""}));
  EXPECT_EQ(test::bad_paints("<svg><rect fill=\"#fff\"/>").size(), 1u);  // not well-formed
}

// Sizes read as the CLI prints them (binary units: its KV cache line says
// "32.0 KiB per layer" where the window said "32.8 kB"); bytes moved stay
// decimal, as the CLI's "MB moved".
TEST(ByteFormat, SizesInTheClisBinaryUnitsTrafficInDecimal) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(812), "812 B");
  EXPECT_EQ(format_bytes(32768), "32.0 KiB");
  EXPECT_EQ(format_bytes(131072), "128.0 KiB");
  EXPECT_EQ(format_bytes(474.7 * 1024 * 1024), "474.7 MiB");
  EXPECT_EQ(format_bytes(5.8 * 1024 * 1024 * 1024), "5.80 GiB");
  EXPECT_EQ(format_bytes_moved(21.1e6), "21.1 MB");
  EXPECT_EQ(format_bytes_moved(812), "812 B");
  // A real session's KV cache per layer: the CLI's figure, "%.1f KiB".
  Fixture f;
  const double per_layer = f.session->history().back()->kv_after.bytes_per_layer_used;
  ASSERT_GE(per_layer, 1024.0);
  char cli[48];
  std::snprintf(cli, sizeof cli, "%.1f KiB", per_layer / 1024.0);
  EXPECT_EQ(format_bytes(per_layer), cli);
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
