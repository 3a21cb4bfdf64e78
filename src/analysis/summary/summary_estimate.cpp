// summary of an estimate (summary_estimate.h): short, first, so that no one
// reads the numbers below as a recording's.
#include "analysis/summary/summary_estimate.h"

#include "util/text_format.h"

namespace memsight {
namespace {

std::string text_of(const PyValue* v) {
  return v && v->kind == PyValue::Kind::Str ? v->s.str() : std::string();
}

}  // namespace

EstimateNote read_estimate_note(const Snapshot& snap) {
  EstimateNote e;
  const PyValue* est = snap.top("memsight_estimate");
  if (!est || est->kind != PyValue::Kind::Dict) return e;
  e.present = true;
  e.produced_by = text_of(est->get("produced_by"));
  if (const PyValue* c = est->get("completed")) e.completed_by = text_of(c->get("by"));
  if (const PyValue* terms = est->get("terms"); terms && terms->kind == PyValue::Kind::List)
    for (const PyValue& t : terms->items) {
      const PyValue* bytes = t.get("bytes");
      if (bytes && bytes->kind == PyValue::Kind::Int)
        e.terms.emplace_back(text_of(t.get("name")), bytes->i);
    }
  return e;
}

std::string estimate_note_text(const EstimateNote& e) {
  if (!e.present) return "";
  std::string s = "ESTIMATE, not a recording: produced by " +
                  (e.produced_by.empty() ? std::string("(not said)") : e.produced_by);
  s += e.completed_by.empty() ? "; requests only, not yet completed (memsight estimate)"
                              : ", completed by " + e.completed_by;
  s += '\n';
  if (!e.terms.empty()) {
    std::string list;
    for (const auto& [name, bytes] : e.terms)
      list += (list.empty() ? "" : ", ") + name + " " + format_bytes(static_cast<double>(bytes));
    s += "  terms it adds beyond the traced requests: " + list + '\n';
  }
  return s + '\n';
}

void estimate_note_json(JsonWriter& w, const EstimateNote& e) {
  w.begin_object()
      .field("produced_by", e.produced_by)
      .field("completed_by", e.completed_by)
      .key("terms")
      .begin_array();
  for (const auto& [name, bytes] : e.terms)
    w.begin_object().field("name", name).field("bytes", bytes).end_object();
  w.end_array().end_object();
}

}  // namespace memsight
