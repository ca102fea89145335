#include "app/exports/export_csv.h"

#include <cstdio>

#include "app/panels/logits.h"
#include "util/error.h"

namespace ts::app {

namespace {

std::string number(double v) {
  char b[40];
  std::snprintf(b, sizeof(b), "%.9g", v);
  return b;
}

}  // namespace

std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string attention_csv(const AttentionMatrix& m, const std::vector<std::string>& labels) {
  if (m.n == 0) throw Error("no attention to export: run prefill first");
  auto name = [&](int pos) {
    return std::to_string(pos) + ":" +
           (pos < static_cast<int>(labels.size()) ? labels[pos] : std::string());
  };
  std::string out = "query\\key";
  for (int k = 0; k < m.n; ++k) out += "," + csv_field(name(k));
  out += "\r\n";
  for (int q = 0; q < m.n; ++q) {
    out += csv_field(name(q));
    for (int k = 0; k < m.n; ++k) {
      out += ',';
      const float v = m.at(q, k);
      if (v >= 0) out += number(v);
    }
    out += "\r\n";
  }
  return out;
}

std::string logits_csv(const StepTrace& trace, int step, const TokenPieceFn& piece) {
  std::string out = "step,lane,token,id,logit,probability,rank\r\n";
  bool any = false;
  for (const LaneStep& ls : trace.lanes) {
    if (ls.logits.empty()) continue;
    any = true;
    LogitsView lv;
    compute_logits_view(ls, lv);
    const std::string prefix = std::to_string(step) + "," + std::to_string(ls.lane) + ",";
    for (size_t r = 0; r < lv.ranked.size(); ++r) {
      const int id = lv.ranked[r];
      out += prefix + csv_field(piece(id)) + "," + std::to_string(id) + "," +
             number(ls.logits[id]) + "," + number(lv.probs[id]) + "," + std::to_string(r + 1) +
             "\r\n";
    }
  }
  if (!any) throw Error("no logits to export at this step");
  return out;
}

}  // namespace ts::app
