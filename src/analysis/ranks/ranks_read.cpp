// What the inputs of `memsight ranks` name (files, directories, glob
// patterns, a dump round's manifest), and reading them: a few files at a
// time, each summarised and dropped before the next, so memory holds a few
// snapshots being read and a summary per rank, never every snapshot.
#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <new>

#include "analysis/ranks/ranks_checks.h"
#include "input/json_stream.h"
#include "input/source.h"
#include "memsight/error.h"
#include "memsight/ranks.h"
#include "memsight/reader.h"
#include "util/float_chars.h"
#include "util/natural_order.h"
#include "util/parallel.h"
#include "util/text_format.h"

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

// A file a manifest names, as a path to read. A manifest is data, and the
// paths in it must not pick what memsight reads: a relative path is read
// inside the manifest's folder and must stay there ("../../etc/passwd" is
// refused). An absolute path is what memsight.torch writes for a file
// another node wrote into its own folder: it is read by its file name
// beside the manifest (the dumps gathered into one folder), where it points
// when that is a folder beside the manifest's (one node's folder per rank),
// and elsewhere only when the user allowed it (--allow-absolute); always
// only a snapshot file (never /etc/passwd).
std::string manifest_file(const std::string& manifest, const std::string& file, int64_t rank,
                          bool allow_absolute) {
  const fs::path dir = fs::path(manifest).parent_path();
  const fs::path p(file);
  const std::string who = rank >= 0 ? "rank " + std::to_string(rank) + "'s file '" + file + "'"
                                    : "the file '" + file + "'";
  if (p.is_relative()) {
    fs::path norm = p.lexically_normal();
    if (norm.empty() || *norm.begin() == ".." || !norm.has_filename())
      throw Error(who +
                  " is outside the manifest's folder; a manifest's relative paths are read "
                  "inside its folder");
    return (dir / norm).string();
  }
  const std::string beside = (dir / p.filename()).string();
  if (p.has_filename() && exists(beside)) return beside;
  if (!snapshot_name(p.filename().string()))
    throw Error(who + " is outside the manifest's folder and names no snapshot file (*.pickle " +
                "or *.pkl, compressed or not)");
  const fs::path up = fs::path(dir).lexically_normal().parent_path();
  const fs::path rel = p.lexically_normal().lexically_relative(up);
  const bool sibling = !up.empty() && !rel.empty() && *rel.begin() != ".." &&
                       rel.begin() != rel.end() && std::distance(rel.begin(), rel.end()) == 2;
  if (!allow_absolute && !sibling)
    throw Error(who + " is outside the manifest's folder and the folders beside it; " +
                "--allow-absolute reads a manifest's absolute paths");
  return file;
}

struct ManifestEntry {
  int64_t rank = -1;
  std::string file, why;
};

ManifestEntry read_entry(json::Reader& r) {
  ManifestEntry e;
  std::string key;
  r.begin_object();
  while (r.next_key(key)) {
    if (key == "rank" && r.peek() == json::Kind::Number)
      e.rank = r.integer();
    else if (key == "file" && r.peek() == json::Kind::String)
      r.string(e.file);
    else if (key == "why" && r.peek() == json::Kind::String)
      r.string(e.why);
    else
      r.skip();
  }
  return e;
}

// memsight.torch's manifest of a dump round (docs/formats.md).
void read_manifest(const std::string& path, RankInputs& out, bool allow_absolute) {
  const size_t before = out.files.size();
  read_named(path, [&] {
    auto src = open_source(path);
    json::Reader r(*src);
    if (r.peek() != json::Kind::Object) throw Error("not a memsight dump manifest (a JSON object)");
    bool marked = false;
    std::string key;
    r.begin_object();
    while (r.next_key(key)) {
      if (key == "memsight_rank_dumps") {
        r.skip();
        marked = true;
      } else if (key == "world_size" && r.peek() == json::Kind::Number) {
        // The number may be any JSON number: range-checked as text first.
        double ws = r.number();
        if (!(ws >= 1 && ws <= double(kMaxWorldSize)) || ws != std::floor(ws))
          throw Error("world_size " + shortest_text(ws) + " is outside 1 to " +
                      count_text(kMaxWorldSize));
        out.manifest_world_size = static_cast<int64_t>(ws);
      } else if ((key == "ranks" || key == "missing") && r.peek() == json::Kind::Array) {
        r.begin_array();
        while (r.next_item()) {
          ManifestEntry e = read_entry(r);
          if (key == "ranks" && !e.file.empty())
            out.files.push_back(manifest_file(path, e.file, e.rank, allow_absolute));
          if (key == "missing" && e.rank >= 0) out.manifest_missing.emplace_back(e.rank, e.why);
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

// A directory's entry or a pattern's match that names a link leading
// nowhere: skipped, with a note naming it; a file read is never decided by
// the order a directory lists its entries in. Any other failure to look at
// it is an Error naming the entry. True for a file to read.
bool usable(const std::string& path, RankInputs& out) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return S_ISREG(st.st_mode);
  const int err = errno;
  struct stat lst {};
  if (::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode) && (err == ENOENT || err == ELOOP)) {
    std::error_code ec;
    fs::path to = fs::read_symlink(path, ec);
    out.notes.push_back("skipped " + path + ": " +
                        (err == ELOOP
                             ? std::string("a loop of symbolic links")
                             : "a symbolic link to '" + to.string() + "', which does not exist"));
    return false;
  }
  throw Error(path + ": " + std::strerror(err));
}

void add_directory(const std::string& dir, RankInputs& out) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    names.push_back(it->path().filename().string());
  if (ec) throw Error(dir + ": " + ec.message());
  std::sort(names.begin(), names.end(),
            [](const std::string& a, const std::string& b) { return natural_less(a, b); });
  std::vector<std::string> files, manifests;
  const size_t skipped = out.notes.size();
  for (const std::string& name : names) {
    if (!snapshot_name(name) && !manifest_name(name)) continue;
    const std::string path = (fs::path(dir) / name).string();
    if (!usable(path, out)) continue;
    (snapshot_name(name) ? files : manifests).push_back(path);
  }
  if (files.empty() && out.notes.size() > skipped)
    throw Error(dir + ": no snapshot file to read (" + out.notes[skipped] + ")");
  if (files.empty())
    throw Error(dir + ": no snapshot files (*.pickle, *.pkl, compressed or not) in this directory");
  out.files.insert(out.files.end(), files.begin(), files.end());
  // One round's manifest says which ranks wrote nothing.
  if (manifests.size() == 1) {
    RankInputs m;
    // Its paths are never read (the directory lists the files): none refused.
    read_manifest(manifests[0], m, /*allow_absolute=*/true);
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
    if (!is_dir(f) && usable(f, out)) out.files.push_back(f);
}

}  // namespace

unsigned rank_jobs(size_t files, unsigned asked) {
  unsigned n = asked ? asked : std::min(4u, threads_allowed());
  return static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>(n, files)));
}

RankInputs expand_rank_inputs(const std::vector<std::string>& inputs, bool allow_absolute) {
  RankInputs out;
  for (const std::string& in : inputs) {
    if (in == "-") {
      out.files.push_back(in);
    } else if (is_dir(in)) {
      add_directory(in, out);
    } else if (exists(in)) {
      if (ends_with(in, ".json"))
        read_manifest(in, out, allow_absolute);
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
  RankInputs in = expand_rank_inputs(inputs, opts.allow_absolute);
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
    rep.missing = ranks_missing(rep.world_size, rank_numbers(rep));
  }
  rep.manifest_missing = std::move(in.manifest_missing);
  rep.notes.insert(rep.notes.begin(), in.notes.begin(), in.notes.end());
  return rep;
}

}  // namespace memsight
