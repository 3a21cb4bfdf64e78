// What the inputs of `memsight ranks` name (files, directories, glob
// patterns, a dump round's manifest), and reading them: a few files at a
// time, each summarised and dropped before the next, so memory holds a few
// snapshots being read and a summary per rank, never every snapshot.
#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <new>

#include "input/json_stream.h"
#include "input/source.h"
#include "memsight/error.h"
#include "memsight/ranks.h"
#include "memsight/reader.h"
#include "util/natural_order.h"
#include "util/parallel.h"

namespace memsight {
namespace {

namespace fs = std::filesystem;

bool is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// A snapshot's file name: .pickle or .pkl, compressed or not.
bool snapshot_name(std::string_view name) {
  std::string_view base = without_compression_suffix(name);
  return ends_with(base, ".pickle") || ends_with(base, ".pkl");
}

bool manifest_name(std::string_view name) { return ends_with(name, "_manifest.json"); }

// A file the manifest names: as written, else beside the manifest (the
// dumps were gathered from several nodes into one folder).
std::string manifest_file(const std::string& manifest, const std::string& file) {
  fs::path dir = fs::path(manifest).parent_path();
  fs::path p(file);
  if (p.is_relative()) return (dir / p).string();
  if (exists(file)) return file;
  return (dir / p.filename()).string();
}

// memsight.torch's manifest of a dump round (docs/formats.md).
void read_manifest(const std::string& path, RankInputs& out) {
  const size_t before = out.files.size();
  read_named(path, [&] {
    auto src = open_source(path);
    json::Reader r(*src);
    if (r.peek() != json::Kind::Object) throw Error("not a memsight dump manifest (a JSON object)");
    bool marked = false;
    std::string key, text;
    r.begin_object();
    while (r.next_key(key)) {
      if (key == "memsight_rank_dumps") {
        r.skip();
        marked = true;
      } else if (key == "world_size" && r.peek() == json::Kind::Number) {
        out.manifest_world_size = r.integer();
      } else if ((key == "ranks" || key == "missing") && r.peek() == json::Kind::Array) {
        r.begin_array();
        while (r.next_item()) {
          int64_t rank = -1;
          std::string file, why;
          r.begin_object();
          while (r.next_key(text)) {
            if (text == "rank" && r.peek() == json::Kind::Number)
              rank = r.integer();
            else if (text == "file" && r.peek() == json::Kind::String)
              r.string(file);
            else if (text == "why" && r.peek() == json::Kind::String)
              r.string(why);
            else
              r.skip();
          }
          if (key == "ranks" && !file.empty()) out.files.push_back(manifest_file(path, file));
          if (key == "missing" && rank >= 0) out.manifest_missing.emplace_back(rank, why);
        }
      } else {
        r.skip();
      }
    }
    r.finish();
    if (!marked) throw Error("not a memsight dump manifest (no \"memsight_rank_dumps\" key)");
    if (out.files.size() == before)
      throw Error("the manifest lists no snapshot file (no rank answered its round)");
  });
}

void add_directory(const std::string& dir, RankInputs& out) {
  std::vector<std::string> files, manifests;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (!e.is_regular_file(ec)) continue;
    if (snapshot_name(name)) files.push_back(e.path().string());
    if (manifest_name(name)) manifests.push_back(e.path().string());
  }
  if (ec) throw Error(dir + ": " + ec.message());
  if (files.empty())
    throw Error(dir + ": no snapshot files (*.pickle, *.pkl, compressed or not) in this directory");
  std::sort(files.begin(), files.end(),
            [](const std::string& a, const std::string& b) { return natural_less(a, b); });
  out.files.insert(out.files.end(), files.begin(), files.end());
  // One round's manifest says which ranks wrote nothing.
  if (manifests.size() == 1) {
    RankInputs m;
    read_manifest(manifests[0], m);
    out.manifest_missing = m.manifest_missing;
    out.manifest_world_size = m.manifest_world_size;
  }
}

void add_glob(const std::string& pattern, RankInputs& out) {
  glob_t g{};
  int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> files;
  for (size_t i = 0; rc == 0 && i < g.gl_pathc; ++i) files.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  if (files.empty()) throw Error(pattern + ": no file matches");
  std::sort(files.begin(), files.end(),
            [](const std::string& a, const std::string& b) { return natural_less(a, b); });
  for (const std::string& f : files)
    if (!is_dir(f)) out.files.push_back(f);
}

}  // namespace

unsigned rank_jobs(size_t files, unsigned asked) {
  unsigned n = asked ? asked : std::min(4u, threads_allowed());
  return static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>(n, files)));
}

RankInputs expand_rank_inputs(const std::vector<std::string>& inputs) {
  RankInputs out;
  for (const std::string& in : inputs) {
    if (in == "-") {
      out.files.push_back(in);
    } else if (is_dir(in)) {
      add_directory(in, out);
    } else if (exists(in)) {
      if (ends_with(in, ".json"))
        read_manifest(in, out);
      else
        out.files.push_back(in);
    } else if (in.find_first_of("*?[") != std::string::npos) {
      add_glob(in, out);
    } else {
      out.files.push_back(in);  // the read names what is wrong with it
    }
  }
  return out;
}

RanksReport read_ranks(const std::vector<std::string>& inputs, const RanksOptions& opts) {
  RankInputs in = expand_rank_inputs(inputs);
  const size_t n = in.files.size();
  if (n == 0) throw Error("no snapshot files given");
  std::vector<RankSummary> ranks(n);
  const uint64_t limit = max_expanded_setting();  // the caller's, for every thread
  parallel_for(n, rank_jobs(n, opts.jobs), [&](size_t i) {
    set_max_expanded(limit);
    try {
      Snapshot snap = read_snapshot_file(in.files[i]);
      ranks[i] = summarize_rank(snap, in.files[i], opts.user_code);
    } catch (const std::bad_alloc&) {
      throw Error(input_name(in.files[i]) + ": out of memory");
    }
  });
  RanksReport rep = merge_ranks(std::move(ranks));
  if (rep.world_size < 0 && in.manifest_world_size > 0) {
    rep.world_size = in.manifest_world_size;
    for (int64_t k = 0; k < rep.world_size; ++k)
      if (std::none_of(rep.ranks.begin(), rep.ranks.end(),
                       [&](const RankSummary& r) { return r.rank == k; }))
        rep.missing.push_back(k);
  }
  rep.manifest_missing = std::move(in.manifest_missing);
  return rep;
}

}  // namespace memsight
