#pragma once
// The whole session as one JSON document: model, prompt, lanes, every step.
#include <filesystem>
#include <functional>

#include <nlohmann/json.hpp>

#include "session/session.h"
#include "trace/json_export.h"
#include "util/error.h"

namespace ts {

// The document's "format". Version 2 added "replay" (the head's vocabulary,
// banned-words lists and branch records; each step's full records: context,
// every logit, attention, beam and contrastive steps; later also each
// speculative round, DoLa step and lookahead or prompt-lookup pass whole,
// which a reader of the first v2 refused by the lane's strategy rather than
// misread), from which
// session_import.h rebuilds the records without the model. The version
// changes whenever a reader of the old one would misread the new one.
inline constexpr const char* kSessionFormat = "tokenscope-session/2";

nlohmann::json session_to_json(const Session& session, const JsonExportOptions& options = {});

struct SessionFileOptions {
  bool interrupted = false;      // written as "interrupted": true (the run was stopped early)
  std::function<bool()> cancel;  // asked between steps while writing; true stops the write
};

// Thrown by write_session_json when options.cancel() said stop; nothing was written.
class ExportCancelled : public Error {
 public:
  ExportCancelled() : Error("export cancelled") {}
};

// Writes session_to_json's document plus "interrupted", one step at a time
// (memory: one step's JSON, not the whole tree). A regular file (a symbolic
// link: the file it names) is written to a temporary file beside it and
// renamed into place when complete, so it is never seen half-written; a
// device, a FIFO or an open file (/dev/stdout) is appended to where it
// stands (util/atomic_file.h). Throws ts::Error (one line, with the reason)
// when the file cannot be written.
void write_session_json(const Session& session, const std::filesystem::path& file,
                        const JsonExportOptions& options = {},
                        const SessionFileOptions& file_options = {});

}  // namespace ts
