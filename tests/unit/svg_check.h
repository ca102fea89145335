#pragma once
// Exported SVG read back as the tests read it: a small DOM from a real XML
// parser (expat), and the check that every colour in the document is one a
// viewer reads. Every fill, stroke and stop-color anywhere (patterns and
// gradients included) is checked: a style whose colour outlived the string
// it pointed to writes whatever bytes took that memory ("8,192 k", U+FFFD),
// and this check is what catches it in a test. Header-only: the export unit
// tests and the GUI export tests both use it.
#include <expat.h>

#include <array>
#include <cctype>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ts::test {

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

inline ParseResult parse_xml(const std::string& doc) {
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

// A paint as the exports may write it: none, #rgb, #rrggbb, rgb(r, g, b)
// (numbers or percentages), one of CSS's basic colour keywords, or
// url(#id) naming an element of the same document.
inline bool valid_paint(const std::string& v, const std::set<std::string>& ids) {
  static const std::array<const char*, 18> named = {
      "none",    "currentColor", "black", "silver", "gray",   "white", "maroon", "red",  "purple",
      "fuchsia", "green",        "lime",  "olive",  "yellow", "navy",  "blue",   "teal", "aqua"};
  for (const char* n : named)
    if (v == n) return true;
  auto inside = [&](const char* open) -> std::optional<std::string> {
    const std::string o = open;
    if (v.size() <= o.size() || v.compare(0, o.size(), o) != 0 || v.back() != ')') return {};
    return v.substr(o.size(), v.size() - o.size() - 1);
  };
  if (const auto id = inside("url(#")) return ids.count(*id) > 0;
  if (const auto args = inside("rgb(")) {
    // Three numbers 0-255 (or percentages), comma-separated, spaces allowed.
    int numbers = 0;
    size_t i = 0;
    const std::string& a = *args;
    auto skip_spaces = [&] {
      while (i < a.size() && a[i] == ' ') ++i;
    };
    for (; numbers < 3; ++numbers) {
      skip_spaces();
      const size_t start = i;
      while (i < a.size() && std::isdigit(static_cast<unsigned char>(a[i]))) ++i;
      if (i == start || i - start > 3 || std::stoi(a.substr(start, i - start)) > 255) return false;
      if (i < a.size() && a[i] == '%') ++i;
      skip_spaces();
      if (numbers < 2 && (i >= a.size() || a[i++] != ',')) return false;
    }
    return i == a.size();
  }
  if (v.empty() || v[0] != '#' || (v.size() != 4 && v.size() != 7)) return false;
  for (size_t i = 1; i < v.size(); ++i)
    if (!std::isxdigit(static_cast<unsigned char>(v[i]))) return false;
  return true;
}

// One line per attribute that is not a valid paint, e.g.
// `<text> fill="8,192 k"`; empty when every colour is valid. A document
// that is not well-formed XML gives a line saying so.
inline std::vector<std::string> bad_paints(const std::string& svg) {
  const ParseResult doc = parse_xml(svg);
  std::vector<std::string> bad;
  if (!doc.error.empty()) bad.push_back("not well-formed XML: " + doc.error);
  if (!doc.root) return bad;
  std::vector<const Element*> all;
  std::vector<const Element*> todo = {doc.root.get()};
  while (!todo.empty()) {
    const Element* e = todo.back();
    todo.pop_back();
    all.push_back(e);
    for (const auto& c : e->children) todo.push_back(c.get());
  }
  std::set<std::string> ids;
  for (const Element* e : all)
    if (!e->attr("id").empty()) ids.insert(e->attr("id"));
  for (const Element* e : all)
    for (const char* key : {"fill", "stroke", "stop-color"})
      if (e->attrs.count(key) && !valid_paint(e->attr(key), ids))
        bad.push_back("<" + e->name + "> " + key + "=\"" + e->attr(key) + "\"");
  return bad;
}

// The lines of bad_paints as one message for a test's failure output.
inline std::string paint_report(const std::vector<std::string>& bad) {
  std::string out;
  for (size_t i = 0; i < bad.size() && i < 20; ++i) out += "  " + bad[i] + "\n";
  if (bad.size() > 20) out += "  ... and " + std::to_string(bad.size() - 20) + " more\n";
  return out;
}

}  // namespace ts::test
