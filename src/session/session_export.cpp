#include "session/session_export.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <system_error>

#include "util/error.h"

namespace ts {
namespace fs = std::filesystem;

using nlohmann::json;

namespace {

// Everything but the steps (the key that sorts last: "steps").
json session_head_to_json(const Session& session) {
  const Tokenizer& tok = session.tokenizer();
  const ModelConfig& cfg = session.engine().config();
  json prompt_tokens = json::array();
  for (const TokenSpan& t : session.prompt_tokens())
    prompt_tokens.push_back({{"id", t.id},
                             {"text", tok.token_bytes(t.id)},
                             {"byte_begin", t.byte_begin},
                             {"byte_end", t.byte_end}});
  json lanes = json::array();
  for (const Lane& lane : session.lanes())
    lanes.push_back({{"id", lane.id},
                     {"strategy", format_strategy(lane.params)},
                     {"generated", lane.generated},
                     {"text", tok.decode(lane.generated)},
                     {"stop_reason", lane.stop_reason},
                     {"parent", lane.parent},
                     {"branch_step", lane.branch_step},
                     {"first_step", lane.first_step},
                     {"closed", lane.closed}});
  return {{"format", "tokenscope-session/1"},
          {"model",
           {{"vocab_size", cfg.vocab_size},
            {"n_ctx", cfg.n_ctx},
            {"n_embd", cfg.n_embd},
            {"n_head", cfg.n_head},
            {"n_layer", cfg.n_layer},
            {"parameters", cfg.parameter_count()},
            {"source", session.engine().weights().source}}},
          {"backend", session.engine().backend().name()},
          {"device", session.engine().backend().device_name()},
          {"kv_cache", session.options().kv_cache},
          {"prompt", session.prompt_text()},
          {"prompt_tokens", prompt_tokens},
          {"lanes", lanes},
          {"state", state_name(session.state())}};
}

std::string dump(const json& j) {
  // Token pieces can be partial UTF-8: replace rather than throw while dumping.
  return j.dump(1, ' ', false, json::error_handler_t::replace);
}

std::string reason() { return std::strerror(errno); }

}  // namespace

json session_to_json(const Session& session, const JsonExportOptions& options) {
  json doc = session_head_to_json(session);
  json steps = json::array();
  for (const StepTracePtr& s : session.history()) steps.push_back(step_to_json(*s, options));
  doc["steps"] = std::move(steps);
  return doc;
}

void write_session_json(const Session& session, const fs::path& file,
                        const JsonExportOptions& options, const SessionFileOptions& file_options) {
  std::error_code ec;
  const fs::file_status st = fs::status(file, ec);
  if (fs::is_directory(st)) throw Error(file.string() + ": is a directory");
  // A regular (or new) file goes through a temporary file and a rename; a
  // device such as /dev/stdout or a FIFO cannot be replaced, so it is written as is.
  const bool atomic = !fs::exists(st) || fs::is_regular_file(st);
  const fs::path target =
      atomic ? fs::path(file.string() + ".tmp-" + std::to_string(::getpid())) : file;
  std::ofstream out(target, std::ios::binary);
  if (!out) throw Error(file.string() + ": cannot open for writing (" + reason() + ")");
  auto abandon = [&] {
    out.close();
    if (atomic) fs::remove(target, ec);
  };
  try {
    json head = session_head_to_json(session);
    head["interrupted"] = file_options.interrupted;
    std::string text = dump(head);
    text.pop_back();  // the closing brace: the steps follow
    out << text << ",\n \"steps\": [";
    bool first = true;
    for (const StepTracePtr& s : session.history()) {
      if (file_options.cancel && file_options.cancel()) throw ExportCancelled();
      out << (first ? "\n" : ",\n") << dump(step_to_json(*s, options));
      first = false;
      if (!out) break;
    }
    out << "\n ]\n}\n";
    out.flush();
  } catch (...) {
    abandon();
    throw;
  }
  if (!out) {
    const std::string why = reason();
    abandon();
    throw Error(file.string() + ": write failed (" + why + ")");
  }
  out.close();
  if (!atomic) return;
  if (file_options.cancel && file_options.cancel()) {
    fs::remove(target, ec);
    throw ExportCancelled();
  }
  fs::rename(target, file, ec);
  if (ec) {
    fs::remove(target, ec);
    throw Error(file.string() + ": cannot write (" + ec.message() + ")");
  }
}

}  // namespace ts
